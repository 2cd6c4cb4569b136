/**
 * A node and a runnable as metroctl shows them: the fields of `nodes -o
 * json`, `node describe -o json` and `tree -o json`, which the observer
 * sends its page too. Plain types without imports, so that the page's
 * build (observer-ui) can share them without pulling in Node.
 */

/** One row of `metroctl nodes`. */
export interface NodeView {
  id: string;
  /** The address the node reported; null before its first status. */
  address: string | null;
  /** NEW, STANDBY, UP or DECOMMISSIONED. */
  state: string;
  /** Held roles: consensus, controller, worker. */
  roles: string[];
  /** UNKNOWN, HEALTHY or HEARTBEAT_TIMEOUT, as the curator leader sees it. */
  health: string;
  /** Seconds since the leader's last heartbeat from the node; null if it never heard one. */
  heartbeatAgeSeconds: number | null;
  labels: Record<string, string>;
}

/**
 * Everything metroctl knows about a node: the NodeView and what the
 * node last reported, its consensus membership and its curator. This is
 * what `node describe` prints and what `--filter` expressions see as `node`.
 */
export interface NodeDescription extends NodeView {
  /** Version of the node software, from its last status; null before the first. */
  version: string | null;
  /**
   * The wire protocol version the node speaks (@metropolis/proto's
   * protocolVersion), from its last status; null before the first.
   */
  protocolVersion: number | null;
  /** Identifier of the node's current boot, from its last status; null before the first. */
  bootId: string | null;
  /** When the node produced its last status (ISO 8601); null if unknown. */
  statusTime: string | null;
  consensus: {
    /** The node holds the consensus member role (runs an etcd member and a curator). */
    member: boolean;
    /**
     * Whether its etcd member votes or is still a learner: always null, because
     * GetNodes only has the role (GetClusterConsensus has the etcd members:
     * `metroctl cluster members`).
     */
    voter: null;
  };
  curator: {
    /** The node reported a running curator. */
    running: boolean;
    /** The curator's port at `address`; null when none runs. */
    port: number | null;
    /** The node's curator is the leader metroctl talked to. */
    leader: boolean;
  };
}

/** One runnable of the tree, as `tree -o json` prints it. */
export interface SupervisionTreeNode {
  /** Full DN. */
  dn: string;
  /** Last part of the DN. */
  name: string;
  /** NEW, HEALTHY, DONE, DEAD or CANCELED. */
  state: string;
  restarts: number;
  /** When it entered its state (ISO 8601), if known. */
  since: string | null;
  /** Message of its last failure, if it ever failed. */
  lastError: string | null;
  /** Milliseconds until its scheduled restart, if one is scheduled. */
  nextRestartInMs: number | null;
  /** True when it failed too often and will not be restarted. */
  givenUp: boolean;
  /**
   * What its current run says it is doing (`RunContext.status`; for a state
   * machine's runnable, the machine's state, e.g. `leading.leaseUnconfirmed`),
   * if it published anything.
   */
  status: string | null;
  children: SupervisionTreeNode[];
}
