/** What every enrolment flow works with: the node's storage, its roleserver, and the status it publishes. */
import type { NodeRoot } from "@metropolis/localstorage";
import type { common } from "@metropolis/proto";
import type { NodeCredentials, Roleserver } from "@metropolis/roleserve";
import type { RunContext } from "@metropolis/supervisor";

export interface EnrolmentEnv {
  ctx: RunContext;
  storage: NodeRoot;
  machineKeyPath: string;
  roleserver: Roleserver;
  /** This node's address, as other nodes reach it. */
  address: string;
  /** The cluster's curator port. */
  curatorPort: number;
  /** Interval of CommitNode attempts while waiting for approval. */
  commitIntervalMs: number;
  /** Publishes the node's cluster state. */
  setState(state: common.ClusterState, credentials?: NodeCredentials): void;
}
