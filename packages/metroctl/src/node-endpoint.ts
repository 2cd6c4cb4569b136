/**
 * Where to reach one node directly (its Debug service, its metrics): the
 * owner's credentials, which the node checks, and the address the node
 * reported to the cluster, read from the cluster through an owner session.
 */
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { configFiles, type OwnerCredentials } from "./config-dir";
import { ConfigFileError, MetroctlError } from "./errors";
import { parseNodeId } from "./flag-values";

/** The owner's credentials and node `id`'s reported address. */
export interface NodeEndpoint {
  owner: OwnerCredentials;
  host: string;
}

/**
 * Resolves node `id` for a direct connection.
 * @throws MetroctlError for a malformed ID or a node without an address yet,
 *   ConfigFileError when there is no owner certificate.
 */
export async function nodeEndpoint(ctx: CommandContext, id: string): Promise<NodeEndpoint> {
  parseNodeId(id);
  const owner = await ctx.configDir.readOwnerCredentials();
  if (!owner) {
    throw new ConfigFileError(
      ctx.configDir.path(configFiles.ownerCertificate),
      "no owner certificate: run `metroctl takeownership` first",
    );
  }
  const node = await withOwnerSession(ctx, (session) => session.getNode(id));
  const host = node.status?.externalAddress;
  if (!host) throw new MetroctlError(`node ${id} has not reported an address yet`);
  return { owner, host };
}
