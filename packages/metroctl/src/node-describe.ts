/**
 * `node describe ID`: everything metroctl can learn about one node — its
 * status (state, health, heartbeat age), roles, labels, address, what it last
 * reported, its consensus membership, and whether it runs the curator and
 * leads. The leader is the curator this session talks to: the connection
 * found it through CuratorLocal.GetCurrentLeader and it proved itself with
 * its node certificate.
 */
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { parseNodeId } from "./flag-values";
import { writeLine } from "./io";
import { nodeDescription, type NodeDescription } from "./node-view";
import { writeJson, writeYaml, type ListingFormat } from "./output";

/** The text form of a description: one `Name: value` line per fact. */
export function describeText(n: NodeDescription): string {
  const heartbeat =
    n.heartbeatAgeSeconds === null ? "no heartbeat yet" : `heartbeat ${n.heartbeatAgeSeconds}s ago`;
  const curator = !n.curator.running
    ? "not running"
    : `running${n.curator.port === null ? "" : ` on port ${n.curator.port}`}${n.curator.leader ? ", leader" : ", not the leader"}`;
  const consensus = n.consensus.member
    ? "member (voter or learner: see metroctl cluster members)"
    : "not a member";
  const rows: [string, string][] = [
    ["ID", n.id],
    ["State", n.state],
    ["Health", `${n.health} (${heartbeat})`],
    ["Roles", n.roles.join(", ") || "-"],
    [
      "Labels",
      Object.entries(n.labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(", ") || "-",
    ],
    ["Address", n.address ?? "-"],
    [
      "Version",
      `${n.version ?? "-"}${n.protocolVersion === null ? "" : ` (wire protocol ${n.protocolVersion})`}`,
    ],
    ["Boot ID", n.bootId ?? "-"],
    ["Status time", n.statusTime ?? "-"],
    ["Consensus", consensus],
    ["Curator", curator],
  ];
  const width = Math.max(...rows.map(([name]) => name.length)) + 2;
  return rows.map(([name, value]) => `${name}:`.padEnd(width) + value).join("\n");
}

/** `node describe ID [-o table|wide|json|yaml]` (table and wide are the same text) */
export async function describeNode(
  ctx: CommandContext,
  id: string,
  opts: { output: ListingFormat },
): Promise<void> {
  parseNodeId(id);
  const description = await withOwnerSession(ctx, async (session) =>
    nodeDescription(await session.getNode(id), await session.leaderId()),
  );
  if (opts.output === "json") writeJson(ctx.io.stdout, description);
  else if (opts.output === "yaml") await writeYaml(ctx.io.stdout, description);
  else writeLine(ctx.io.stdout, describeText(description));
}
