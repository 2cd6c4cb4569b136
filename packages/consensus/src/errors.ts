/** Typed errors of the consensus package; each message names what is wrong. */

/** Base class of the consensus package's errors. */
export class ConsensusError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A namespace segment that is empty or contains `:` or `/`. */
export class InvalidNamespaceError extends ConsensusError {
  constructor(readonly segment: string) {
    super(
      `invalid etcd namespace segment ${JSON.stringify(segment)}: it must be non-empty and contain neither ':' nor '/'`,
    );
  }
}

/** The etcd binary is not installed. */
export class EtcdNotInstalledError extends ConsensusError {
  constructor(binary: string) {
    super(
      `etcd binary ${JSON.stringify(binary)} not found: install Debian's etcd-server package (apt-get install etcd-server)`,
    );
  }
}

/** The service was configured inconsistently (e.g. neither bootstrap nor join, and no data on disk). */
export class ConsensusConfigError extends ConsensusError {}

/** A membership change that etcd refused or that does not make sense. */
export class MembershipError extends ConsensusError {}

/**
 * etcd reported that its cluster removed this member (see etcd-log.ts): its
 * data directory will never serve again and may be deleted.
 */
export class MemberRemovedError extends ConsensusError {
  constructor(readonly nodeId: string) {
    super(
      `etcd member ${nodeId} was removed from its cluster (etcd said so): its data is not started again`,
    );
  }
}
