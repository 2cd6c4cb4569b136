/**
 * The cluster's consensus as metroctl shows it: the fields of `cluster
 * members -o json`, which the observer sends its page too (its consensus
 * view), and the one sentence both say about fault tolerance. Plain types and
 * a pure function without imports, so that the page's build (observer-ui)
 * shares them without pulling in Node or the generated protobuf code.
 *
 * The numbers are the curator leader's (GetClusterConsensus's
 * fault_tolerance, computed in one place on the leader); this only words them.
 */

/** One etcd member (GetClusterConsensus's ConsensusMember). */
export interface ConsensusMemberView {
  /** The member's node; empty while an added member has not started. */
  nodeId: string;
  /** etcd's member ID, hex (as etcdctl prints it). */
  memberId: string;
  status: "voter" | "learner" | "unknown";
  /** Whether it leads raft (the etcd leader), as the curator leader's etcd member sees it. */
  raftLeader: boolean;
  /** Whether the curator leader's etcd member has a raft connection with it. */
  reachability: "reachable" | "unreachable" | "unknown";
  /** Whether the member's node reports a running curator. */
  curatorRunning: boolean;
}

/** How many failures the consensus survives (GetClusterConsensus's fault_tolerance). */
export interface FaultToleranceView {
  voters: number;
  learners: number;
  /** Voters that must be up for etcd to commit: voters / 2 + 1. */
  quorum: number;
  /** Voters that may fail with the cluster still committing: voters - quorum. */
  tolerates: number;
  /** Voters the curator leader's etcd member does not reach right now. */
  unreachableVoters: number;
}

/** The whole consensus: what `cluster members -o json` prints (with its summary) and the observer's page shows. */
export interface ConsensusView {
  /** The etcd members: voters first, then learners, each by node ID (not started last), then member ID. */
  members: ConsensusMemberView[];
  /** The curator leader that answered, with its term (it grows with every change of leader). */
  leader: { nodeId: string; host: string; port: number; term: number } | null;
  /**
   * The etcd raft leader's member ID (null while none is known) and the raft
   * term (it grows with every etcd election); null when the curator leader's
   * etcd member did not say.
   */
  raft: { leaderMemberId: string | null; term: number } | null;
  faultTolerance: FaultToleranceView | null;
}

const counted = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`;

/**
 * What `ft` means for the owner, in one line:
 *
 *   3 voters, 0 learners: tolerates 1 failure
 *   1 voter, 1 learner: not fault tolerant
 *   3 voters, 0 learners: tolerates 1 failure; 1 voter unreachable, so no further failure
 *   5 voters, 0 learners: tolerates 2 failures; 1 voter unreachable, so 1 more
 *   3 voters, 0 learners: tolerates 1 failure; 2 voters unreachable: quorum (2) lost
 */
export function faultToleranceSummary(ft: FaultToleranceView): string {
  const members = `${counted(ft.voters, "voter")}, ${counted(ft.learners, "learner")}`;
  const tolerance =
    ft.tolerates === 0 ? "not fault tolerant" : `tolerates ${counted(ft.tolerates, "failure")}`;
  if (ft.unreachableVoters === 0) return `${members}: ${tolerance}`;
  const unreachable = `${counted(ft.unreachableVoters, "voter")} unreachable`;
  const left = ft.tolerates - ft.unreachableVoters;
  const consequence =
    left < 0
      ? `: quorum (${ft.quorum}) lost`
      : left === 0
        ? ", so no further failure"
        : `, so ${left} more`;
  return `${members}: ${tolerance}; ${unreachable}${consequence}`;
}
