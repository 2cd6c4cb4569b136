/** Typed errors of cluster enrolment; each message names the problem. */

/** Base class of every error of cluster enrolment. */
export abstract class ClusterError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    // Set once, here, from the class actually constructed: every subclass
    // shows its own name in stack traces and logs, and can be told apart by
    // `name` where `instanceof` does not work (another realm, a second copy of
    // the package). No subclass sets `name` itself.
    this.name = new.target.name;
  }
}

/** A consensus client was asked for on a node that runs no consensus member. */
export class NoLocalConsensusError extends ClusterError {
  constructor() {
    super("this node runs no consensus member: no local etcd client can be handed out");
  }
}

/** A consensus client was asked for by a user outside the fixed set. */
export class UnknownConsensusUserError extends ClusterError {
  constructor(readonly user: string) {
    super(
      `unknown consensus user ${JSON.stringify(user)}: clients are handed out only to curator, kubernetes-pki and workloads`,
    );
  }
}

/** A consensus client was asked for while the node is not HOME or SPLIT. */
export class ConsensusRefusedError extends ClusterError {
  constructor(readonly state: string) {
    super(
      `refusing a consensus client in cluster state ${state}: only HOME and SPLIT nodes hand them out`,
    );
  }
}

/** The node was removed from the cluster while something waited for it to be home. */
export class DisownedError extends ClusterError {
  constructor() {
    super("this node is being disowned by its cluster: it will not become home");
  }
}

/** The node parameters are missing, unreadable or inconsistent. */
export class NodeParametersError extends ClusterError {}

/**
 * Enrolment cannot go on: the node must not start (the seed's "trapdoor").
 * The message names what failed and what the operator can do.
 */
export class EnrolmentError extends ClusterError {}

/** The cluster refused a request of the enrolment (a wrong ticket, a node it does not know). */
export class ClusterRefusedError extends EnrolmentError {}

/** The cluster's curators presented certificates the CA of this node does not verify. */
export class ClusterCaMismatchError extends EnrolmentError {}

/**
 * An attempt of an enrolment call got no answer from the leader in time (a
 * leader whose machine is gone, say): the leader is given up and the call
 * retried, like one to an unreachable cluster.
 */
export class EnrolmentAnswerTimeoutError extends ClusterError {
  constructor(
    /** The call, e.g. "JoinNode". */
    readonly call: string,
    /** The node of the leader that did not answer. */
    readonly leaderNodeId: string,
    readonly timeoutMs: number,
  ) {
    super(`${call}: leader ${leaderNodeId} did not answer within ${timeoutMs} ms`);
  }
}

/**
 * The node's data directory holds a node, but its sealed configuration is
 * gone. The node cannot rejoin (the sealed configuration holds its node
 * unlock key and join key), and enrolling afresh would register a new node
 * that could never set up its storage: refused before the node speaks to the
 * cluster, so that no attempt leaves a record behind.
 */
export class SealedConfigurationMissingError extends EnrolmentError {
  constructor(
    readonly sealedPath: string,
    readonly dataPath: string,
  ) {
    super(
      `sealed configuration ${sealedPath} is missing, but data directory ${dataPath} holds a node: ` +
        "this node cannot rejoin its cluster without it (a node stopped while it waited for approval never had one), " +
        "and will not enrol afresh over its data; " +
        "restore the sealed configuration, or wipe the node's storage to enrol it as a new node",
    );
  }
}

/**
 * The cluster deleted this node while it ran: the node run ends, as a
 * refused JoinNode would end the next one. The machine can only come back
 * as a new node.
 */
export class NodeDeletedError extends ClusterError {
  constructor(
    readonly nodeId: string,
    reason: string,
  ) {
    super(
      `node ${nodeId} is no longer part of its cluster (${reason}); ` +
        "to use this machine again, wipe its storage and register it as a new node",
    );
  }
}

/**
 * The cluster decommissioned this node and its record asks it to wipe its
 * storage (the owner's `metroctl node decommission --wipe`): the node run
 * ends, and metropolis-node erases the node's storage and powers off. Not a
 * failure of the node; the error carries the order out of the tree.
 */
export class NodeWipeOrderedError extends ClusterError {
  constructor(
    readonly nodeId: string,
    /** Whether the curator answered a heartbeat acknowledging the wipe before the node stopped. */
    readonly acknowledged: boolean,
  ) {
    super(
      `node ${nodeId} was decommissioned by its cluster, whose record of it asks it to wipe its storage` +
        (acknowledged
          ? " (acknowledged to the curator)"
          : " (the acknowledgement did not reach the curator in time)"),
    );
  }
}

/** The enrolment manager was started a second time in one node run. */
export class EnrolmentRestartedError extends ClusterError {
  constructor(cause: unknown) {
    super(
      `enrolment already ran in this node run and failed (${cause instanceof Error ? cause.message : String(cause)}); it is not retried, since it changes the node's storage`,
      { cause },
    );
  }
}
