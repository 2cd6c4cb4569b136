/**
 * What the leader's gRPC services work with. One is built each time this
 * curator becomes leader, and dropped when it stops leading.
 */
import type { Namespace } from "etcd3";
import type { Logger } from "@metropolis/supervisor";
import type { ConsensusStatus } from "@metropolis/consensus";
import { CertificateStore, type CaCertificate, type SecretSealer } from "@metropolis/pki";
import type { ClockSamples } from "./clock-samples";
import type { ConsensusViews } from "./consensus-views";
import type { HeartbeatTracker } from "./heartbeat-tracker";
import type { Caller, HasAuthContext } from "./identity";
import { clusterCaName, clusterPkiPrefix } from "./keys";
import type { CuratorEndpoint, Leadership } from "./leadership";
import type { NodeRecordMirror } from "./node-record-mirror";
import type { Revocations } from "./revocations";

/** The consensus status while it runs: client, membership operations. */
export type RunningConsensus = Extract<ConsensusStatus, { state: "running" }>;

export interface LeaderContext {
  /** This curator. */
  readonly self: CuratorEndpoint;
  /** The curator's etcd namespace (`namespaced:curator/`); read freely, write only through `leadership`. */
  readonly kv: Namespace;
  /**
   * Seals and opens the secrets kept in `kv` (cluster unlock keys, the
   * register ticket): the curator namespace's sealer of the consensus client.
   */
  readonly secrets: SecretSealer;
  /** Guards every write: `leadership.commit(leadership.txn().and(…).then(…))`. */
  readonly leadership: Leadership;
  /** This node's consensus: membership changes for UpdateNodeRoles, status for GetConsensusStatus. */
  readonly consensus: RunningConsensus;
  /** The cluster CA, kept under `/cluster-pki/`. */
  readonly clusterCa: CaCertificate;
  /** The leader's copy of the node records, for listings and caller checks (node-record-mirror.ts). */
  readonly nodes: NodeRecordMirror;
  /** Heartbeats of the nodes, kept in the leader's memory. */
  readonly heartbeats: HeartbeatTracker;
  /**
   * How long DecommissionNode with `wipe` waits for the node's
   * acknowledgement before it revokes the node all the same.
   * @default 30 s (`defaultWipeAcknowledgementTimeoutMs`, management-decommission.ts)
   */
  readonly wipeAcknowledgementTimeoutMs?: number;
  /**
   * The nodes' wall clocks against the leader's, from heartbeats: for the
   * health check of clocks only, never for health, leases or deadlines.
   */
  readonly clocks: ClockSamples;
  /** Each etcd member's own view of the consensus, from its node's heartbeats: for the health check. */
  readonly consensusViews: ConsensusViews;
  readonly logger: Logger;
  /** The cluster CA's revocation list, followed from etcd; `identify` refuses what it revokes. */
  readonly revocations: Revocations;
  /** Classifies a call's caller against the cluster CA and its revocations. */
  identify(call: HasAuthContext): Promise<Caller>;
}

/**
 * The cluster CA's place in the curator namespace; its private key is sealed
 * with `secrets`, the curator namespace's sealer (`client.sub("curator").secrets`).
 */
export function clusterCa(secrets: SecretSealer): CaCertificate {
  return new CertificateStore(secrets, clusterPkiPrefix).ca(clusterCaName);
}
