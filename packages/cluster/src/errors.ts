/** Typed errors of cluster enrolment; each message names the problem. */

export class ClusterError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
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
