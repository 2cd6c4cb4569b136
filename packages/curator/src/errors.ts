/**
 * Typed errors of the curator. `CuratorError`s carry the gRPC status they are
 * answered with, so handlers throw and the listener maps them in one place.
 */
import { status } from "@grpc/grpc-js";

/**
 * Base class of every error of the curator. Not abstract: handlers throw it
 * themselves with the status a failure is answered with when no subclass
 * names it. (NoLeaderError and UnusableLeaderAnswerError in
 * curator-client.ts do not extend it; see there.)
 */
export class CuratorError extends Error {
  constructor(
    readonly code: status,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    // Set once, here, from the class actually constructed: every subclass
    // shows its own name in stack traces and logs, and can be told apart by
    // `name` where `instanceof` does not work (another realm, a second copy of
    // the package). No subclass sets `name` itself.
    this.name = new.target.name;
  }
}

/** The leader's election key is gone or changed: this curator no longer leads. Answered as UNAVAILABLE. */
export class LostLeadershipError extends CuratorError {
  constructor() {
    super(status.UNAVAILABLE, "curator lost leadership; retry with the current leader");
  }
}

/**
 * This curator was the leader, but the renewal of its election lease has not
 * been confirmed in time (lease-deadline.ts): etcd may let another curator
 * lead now, so it serves nothing as the leader. Answered as UNAVAILABLE, so
 * clients ask again for the current leader.
 */
export class LeaseUnconfirmedError extends CuratorError {
  constructor(
    readonly sinceProvenMs: number,
    readonly ttlMs: number,
  ) {
    super(
      status.UNAVAILABLE,
      `not the leader: this curator's election lease was last proven held ${Math.round(sinceProvenMs)} ms ago (TTL ${ttlMs / 1000} s, less a safety margin); ask for the current leader`,
    );
  }
}

/**
 * The leader handed its leadership over rather than take the consensus
 * role from its own node (see management-roles.ts). Answered as
 * UNAVAILABLE, so clients retry with the new leader, which can.
 */
export class LeadershipHandedOverError extends CuratorError {
  constructor(nodeId: string) {
    super(
      status.UNAVAILABLE,
      `curator leadership handed over so that another consensus member can take the consensus role from ${nodeId}, which led; retry with the new leader`,
    );
  }
}

/** The request is malformed. */
export class InvalidArgumentError extends CuratorError {
  constructor(message: string) {
    super(status.INVALID_ARGUMENT, message);
  }
}

/** The node (or other object) named in the request does not exist. */
export class NotFoundError extends CuratorError {
  constructor(message: string) {
    super(status.NOT_FOUND, message);
  }
}

/** What the request would create or claim exists already, held by someone else. */
export class AlreadyExistsError extends CuratorError {
  constructor(message: string) {
    super(status.ALREADY_EXISTS, message);
  }
}

/** The object is not in a state that allows the operation. */
export class FailedPreconditionError extends CuratorError {
  constructor(message: string) {
    super(status.FAILED_PRECONDITION, message);
  }
}

/** The caller presented no usable identity. */
export class UnauthenticatedError extends CuratorError {
  constructor(message: string) {
    super(status.UNAUTHENTICATED, message);
  }
}

/** The caller's identity does not allow the operation. */
export class PermissionDeniedError extends CuratorError {
  constructor(message: string) {
    super(status.PERMISSION_DENIED, message);
  }
}

/**
 * This curator's candidacy ended while it served (its lease expired or was
 * revoked, or a guarded write found its election key gone): the run fails
 * with it, and the supervisor's restart campaigns afresh. It fails the
 * curator's run, not a call; were it ever answered, it would be as
 * UNAVAILABLE, like LostLeadershipError.
 */
export class CandidacyLostError extends CuratorError {
  constructor(role: "leader" | "follower", why: Error) {
    super(
      status.UNAVAILABLE,
      `election lease lost while serving as ${role} (${why.message}); campaigning again on restart`,
      { cause: why },
    );
  }
}
