/**
 * `cluster members`: the cluster's consensus as its owner needs it to judge
 * fault tolerance — each etcd member (voter or learner, the raft leader,
 * whether the curator leader's etcd member reaches it, its curator) and one
 * line saying how many failures the consensus survives
 * (Management.GetClusterConsensus).
 *
 *   NODE                  MEMBER ID         STATUS   RAFT LEADER  REACHABLE  CURATOR
 *   metropolis-1f…        2e1259d415f2a040  voter    yes          yes        leader
 *   metropolis-7c…        8e9e05c52164694d  voter    -            yes        running
 *   (not started)         fd422379fda50e48  learner  -            no         -
 *
 *   2 voters, 1 learner: not fault tolerant
 */
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import {
  faultToleranceSummary,
  type ConsensusMemberView,
  type ConsensusView,
} from "./consensus-fields";
import { consensusView } from "./consensus-view";
import { writeLine } from "./io";
import { renderTable, writeJson, type OutputFormat } from "./output";

/** `cluster members -o json`: the consensus, and the summary line the table ends with. */
export interface ClusterMembersView extends ConsensusView {
  /** e.g. "3 voters, 0 learners: tolerates 1 failure"; null if the leader did not say. */
  summary: string | null;
}

const reachable: Record<ConsensusMemberView["reachability"], string> = {
  reachable: "yes",
  unreachable: "no",
  unknown: "?",
};

/** The table's lines, then the summary (and a note when no raft leader is known). */
export function renderClusterMembers(view: ClusterMembersView): string[] {
  const curatorLeader = view.leader?.nodeId;
  const table = renderTable<ConsensusMemberView>(
    [
      { heading: "NODE", cell: (m) => m.nodeId || "(not started)" },
      { heading: "MEMBER ID", cell: (m) => m.memberId },
      { heading: "STATUS", cell: (m) => m.status },
      { heading: "RAFT LEADER", cell: (m) => (m.raftLeader ? "yes" : "-") },
      { heading: "REACHABLE", cell: (m) => reachable[m.reachability] },
      {
        heading: "CURATOR",
        cell: (m) =>
          m.nodeId !== "" && m.nodeId === curatorLeader
            ? "leader"
            : m.curatorRunning
              ? "running"
              : "-",
      },
    ],
    view.members,
  );
  const lines = [table, ""];
  if (view.summary !== null) lines.push(view.summary);
  if (view.raft !== null && view.raft.leaderMemberId === null) {
    lines.push("no raft leader: the curator leader's etcd member knows of none (an election?)");
  }
  return lines;
}

/** `cluster members [-o json]` */
export async function clusterMembers(
  ctx: CommandContext,
  opts: { output: OutputFormat },
): Promise<void> {
  const res = await withOwnerSession(ctx, (session) => session.getClusterConsensus());
  const consensus = consensusView(res);
  const view: ClusterMembersView = {
    ...consensus,
    summary: consensus.faultTolerance && faultToleranceSummary(consensus.faultTolerance),
  };
  if (opts.output === "json") {
    writeJson(ctx.io.stdout, view);
    return;
  }
  for (const line of renderClusterMembers(view)) writeLine(ctx.io.stdout, line);
}
