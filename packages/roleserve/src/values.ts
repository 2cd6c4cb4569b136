/**
 * The event values the roleserver's workers communicate through. Each worker
 * watches some of them and sets others; none calls another directly, so each
 * can be tested alone against memory values (see the package README).
 *
 * Every value starts unset: a watcher's first `get()` waits until someone
 * knows something.
 */
import type {
  Curator,
  CuratorConnection,
  Revocations,
  RunningConsensus,
} from "@metropolis/curator";
import { MemoryValue } from "@metropolis/event";
import type { common, priv } from "@metropolis/proto";
import type { NodeCredentials } from "./node-credentials";

/**
 * What the cluster manager hands over once enrolment succeeded, whichever way:
 * what the control plane needs to keep the node's sealed configuration
 * current (it adds the CA after a bootstrap, and keeps the cluster unlock key
 * sealed while the node is a consensus member).
 */
export interface EnrolmentSecrets {
  /** The sealed configuration as it is sealed now. */
  sealed: priv.SealedConfiguration;
  /** The cluster unlock key (32 bytes). */
  clusterUnlockKey: Uint8Array;
}

/** What a node bootstrapping a new cluster hands its control plane. */
export interface BootstrapData {
  /** The node's Ed25519 private key seed (32 bytes). */
  nodePrivateKey: Uint8Array;
  /** The join key's public half (32 bytes); the private half is in the sealed configuration. */
  joinPublicKey: Uint8Array;
  /** The initial owner's public key, from the node parameters. */
  ownerPublicKey: Uint8Array;
  /** The first node's labels, from the node parameters. */
  labels: Map<string, string>;
  /**
   * The cluster's initial configuration, from the node parameters (default:
   * the curator's). Its storage policy is overridden by the sealed
   * configuration's, the one this node's storage was formatted with.
   */
  configuration?: common.ClusterConfiguration;
}

/** This node's way to the cluster's control plane, once it has credentials. */
export interface CuratorConnectionValue {
  credentials: NodeCredentials;
  /** Finds and follows the curator leader, authenticated with `credentials`. */
  connection: CuratorConnection;
}

/** The control plane this node runs, while it runs one. */
export interface LocalControlPlane {
  consensus: RunningConsensus;
  curator: Curator;
  /** The port the local curator serves on, at this node's address. */
  curatorPort: number;
}

/** The workload processes this node runs (the stand-in for Kubernetes). */
export interface WorkloadStatus {
  /** Whether the node holds the worker role and runs its declared workloads. */
  running: boolean;
  /** Names of the workloads started. */
  workloads: string[];
}

/** The roleserver's values; see the package comment for who sets which. */
export class RoleserveValues {
  /** Set once enrolment succeeded; nothing runs before. */
  readonly enrolment = new MemoryValue<EnrolmentSecrets>();
  /**
   * Set with the enrolment: the bootstrap data on a node bootstrapping a
   * cluster, else undefined; the control plane sets it back to undefined once
   * the bootstrap finished.
   */
  readonly bootstrapData = new MemoryValue<BootstrapData | undefined>();
  /** Set once the node has credentials: at register/join, or when a bootstrap finishes. */
  readonly curatorConnection = new MemoryValue<CuratorConnectionValue>();
  /** The roles the cluster gave this node; loaded from disk first, then from the curator. */
  readonly localRoles = new MemoryValue<common.NodeRoles>();
  /** The local control plane, or undefined while this node runs none. */
  readonly localControlPlane = new MemoryValue<LocalControlPlane | undefined>();
  /** The workloads this node runs. */
  readonly workloadStatus = new MemoryValue<WorkloadStatus>();
  /**
   * The cluster CA's revocation list as this node knows it, set once the
   * node has credentials (the revocation worker keeps it current); the
   * node's mTLS endpoints refuse the certificates it revokes.
   */
  readonly revocations = new MemoryValue<Revocations>();
  /**
   * The cluster's UP nodes with an address, as the directory worker last
   * saw them from the curator's Watch (set once the backlog arrived, empty
   * ones included); the node's metrics discovery lists them.
   */
  readonly clusterDirectory = new MemoryValue<common.ClusterDirectory>();
  /**
   * Set, with the reason, once the cluster no longer counts this node as one
   * of its own (the owner deleted it). Nothing in the roleserver stops on
   * it: the cluster manager turns it into DISOWNING and ends the node run.
   */
  readonly disowned = new MemoryValue<string>();
  /**
   * True once this node's own record, from the curator (its Watch of itself,
   * over mutual TLS), is DECOMMISSIONED with `wipe_requested`: the owner
   * decommissioned it with `--wipe`. Set before `disowned`. The only thing
   * that makes the node erase its storage (the cluster manager, then
   * metropolis-node): never set from anything local.
   */
  readonly wipeOrdered = new MemoryValue<boolean>(false);
  /**
   * True once the curator answered a heartbeat that acknowledged the wipe:
   * the curator then knows, and revokes the node's certificate.
   */
  readonly wipeAcknowledged = new MemoryValue<boolean>(false);
}
