/**
 * The wire protocol check of RegisterNode and JoinNode: a node that speaks
 * a protocol version this curator does not serve is refused before anything
 * is written, with both versions named, rather than half-understood (see
 * @metropolis/proto's protocol-version.ts for what a version is).
 */
import { servedProtocolVersions, spokenProtocolVersion } from "@metropolis/proto";
import { FailedPreconditionError } from "./errors";

/**
 * Refuses node `who`, which sent protocol version `sent`, unless this
 * curator serves it.
 * @throws FailedPreconditionError naming the node's version and the served ones.
 */
export function checkProtocolVersion(who: string, sent: number): void {
  const spoken = spokenProtocolVersion(sent);
  const { oldest, newest } = servedProtocolVersions;
  if (spoken >= oldest && spoken <= newest) return;
  const served = oldest === newest ? `version ${oldest}` : `versions ${oldest} to ${newest}`;
  throw new FailedPreconditionError(
    `${who} speaks wire protocol version ${spoken}; this curator serves ${served}: ` +
      (spoken > newest ? "upgrade the cluster's curators first" : "upgrade the node"),
  );
}
