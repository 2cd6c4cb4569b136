/** Typed errors of the consensus package; each message names what is wrong. */

/** Base class of the consensus package's errors. */
export abstract class ConsensusError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    // Set once, here, from the class actually constructed: every subclass
    // shows its own name in stack traces and logs, and can be told apart by
    // `name` where `instanceof` does not work (another realm, a second copy of
    // the package). No subclass sets `name` itself.
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
 * A membership change given up while etcd refused it for now (an unhealthy
 * cluster, a change still fresh, a learner not promoted yet) or did not
 * answer (no quorum): worth retrying later, unlike a plain MembershipError.
 */
export class MembershipRefusedError extends MembershipError {
  constructor(
    /** The change, e.g. `adding <node> (<peer URL>) as a learner`. */
    readonly change: string,
    /** Why it was given up: the time ran out, or its caller gave up. */
    readonly why: string,
    /** How long it was tried. */
    readonly triedMs: number,
    /** etcd's last refusal, if it answered at all. */
    readonly refusal: unknown,
  ) {
    super(
      `${change}: ${why} (tried for ${triedMs} ms; ${
        refusal === undefined ? "etcd had not answered" : `etcd's last answer: ${String(refusal)}`
      })`,
      { cause: refusal },
    );
  }
}

/**
 * The member's raft status could not be read (its etcd did not answer in
 * time, or answered something that is not a status): nothing is known.
 */
export class RaftStatusError extends ConsensusError {}

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

/**
 * A sealed secret in etcd does not open. Subclasses say why; every message
 * names the full etcd key, so an operator knows which value is affected.
 */
export class SecretOpenError extends ConsensusError {
  constructor(
    /** The full etcd key of the value (namespace prefix included). */
    readonly key: string,
    /** Why it does not open. */
    readonly reason: string,
  ) {
    super(`secret at ${JSON.stringify(key)} does not open: ${reason}`);
  }
}

/** A sealed secret names a key id the keyring does not hold (retired, or from another cluster). */
export class UnknownSecretKeyError extends SecretOpenError {
  constructor(
    key: string,
    /** The key id the value was sealed under. */
    readonly keyId: number,
    /** The ids the keyring holds. */
    readonly known: readonly number[],
  ) {
    super(key, `unknown key id ${keyId} (the keyring holds ${known.join(", ") || "none"})`);
  }
}

/**
 * A sealed secret fails authentication: tampered with, moved from another
 * etcd key, or sealed under another key with the same id.
 */
export class SecretAuthenticationError extends SecretOpenError {}

/** A value that should be a sealed secret is not one (written in plaintext, or garbage). */
export class NotSealedError extends SecretOpenError {}

/**
 * The cluster secrets keyring is not (yet) in memory: the member has not
 * loaded its wrapped copy, or the client was made without a keyring.
 */
export class KeyringNotLoadedError extends ConsensusError {
  constructor(what: string) {
    super(`the cluster secrets keyring is not loaded: cannot ${what}`);
  }
}

/**
 * A keyring (or a member's wrapped copy of it) is malformed, or is not for
 * this member, or does not open under this member's node key.
 */
export class KeyringError extends ConsensusError {}

/** A rotation of the cluster secrets key could not finish; what it did is safe to redo. */
export class RotationError extends ConsensusError {}

/**
 * A guarded write found the guard gone: the curator leader's election key
 * that the caller vouched for no longer holds (leadership lost).
 */
export class GuardLostError extends ConsensusError {
  constructor(
    /** The full etcd key of the guard. */
    readonly guardKey: string,
  ) {
    super(
      `guard ${JSON.stringify(guardKey)} no longer holds (leadership lost); nothing more was written`,
    );
  }
}

/**
 * etcd hands raft leadership over only when asked by the raft leader itself,
 * and the member asked does not lead raft.
 */
export class NotRaftLeaderError extends ConsensusError {
  constructor(
    /** The member asked, hex. */
    readonly memberId: string,
    /** The member that leads raft as the one asked sees it, hex; undefined while none does. */
    readonly leaderId: string | undefined,
  ) {
    super(
      leaderId === undefined
        ? `etcd member ${memberId} knows of no raft leader (an election, or no quorum)`
        : `etcd member ${memberId} does not lead raft (member ${leaderId} does): only the raft leader can hand its leadership over`,
    );
  }
}

/** An etcd maintenance call (MoveLeader, Defragment, Alarm) that failed or was refused. */
export class MemberMaintenanceError extends ConsensusError {}

/**
 * The cluster identity recorded in this node's etcd data (its write-ahead
 * log's metadata) could not be read: nothing is concluded from it, and the
 * data is kept (stale-member.ts).
 */
export class MemberIdentityError extends ConsensusError {
  constructor(
    readonly path: string,
    why: string,
  ) {
    super(`consensus: cannot read the etcd cluster and member ID recorded in ${path}: ${why}`);
  }
}
