/**
 * The roleserver's errors. Launchers end with one of the first two on
 * purpose: the supervisor then cancels what they started and runs them
 * again, which is how a role change takes effect (seed 004).
 */
import { status } from "@grpc/grpc-js";

/** Base class of every error of the roleserver. */
export abstract class RoleserveError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    // Set once, here, from the class actually constructed: every subclass
    // shows its own name in stack traces and logs, and can be told apart by
    // `name` where `instanceof` does not work (another realm, a second copy of
    // the package). No subclass sets `name` itself.
    this.name = new.target.name;
  }
}

/** A role flag a launcher depends on flipped; the launcher restarts to follow it. */
export class RolesChangedError extends RoleserveError {
  constructor(
    /** What the launcher runs, e.g. "control plane", "workloads". */
    readonly launcher: string,
    /** Whether it should run now. */
    readonly shouldRun: boolean,
  ) {
    super(
      `${launcher}: roles changed, it should ${shouldRun ? "now run" : "no longer run"}: restarting`,
    );
  }
}

/**
 * etcd reported that its cluster removed this node's member (the owner took
 * the consensus role away): the control plane restarts, and its next run
 * stands down, removing the member's data on etcd's word.
 */
export class ConsensusRemovedError extends RoleserveError {
  constructor() {
    super(
      "control plane: etcd reported that the cluster removed this node's member; restarting to stand down",
    );
  }
}

/**
 * The values say this node runs a control plane, but give it nothing to run
 * one with (neither bootstrap data nor node credentials): a bug upstream,
 * never a state of a real node.
 */
export class ControlPlaneInputError extends RoleserveError {
  constructor(what: string) {
    super(`control plane: ${what}`);
  }
}

/**
 * A step of the control plane machine ran before the step that gives it what
 * it needs (controlplane-machine.ts orders them): a bug of the machine, never
 * a state of a real node.
 */
export class ControlPlaneStepError extends RoleserveError {
  constructor(
    /** The step that ran, e.g. "startCurator". */
    readonly step: string,
    /** What it lacked, e.g. "a member that serves". */
    readonly needs: string,
  ) {
    super(`control plane: step ${step} ran without ${needs}`);
  }
}

/**
 * While this node's member started from its etcd data without reaching a
 * quorum, the cluster it is told to join proved that data stale (another
 * etcd cluster, which counts this node as a member: @metropolis/consensus
 * stale-member.ts): the control plane restarts, and its next run, with etcd
 * stopped, checks again, removes the data and joins as a learner.
 */
export class StaleMemberDataError extends RoleserveError {
  constructor(readonly reason: string) {
    super(`control plane: ${reason}; restarting to join`);
  }
}

/** The local etcd member stopped while the curator used it; the control plane restarts whole. */
export class ConsensusStoppedError extends RoleserveError {
  constructor() {
    super("control plane: the local consensus member stopped; restarting consensus and curator");
  }
}

/**
 * A curator stream (Watch, Heartbeat) failed or ended. The worker reading it
 * fails with this error and the supervisor restarts it, which reconnects
 * through the CuratorConnection (finding a new leader if there is one).
 * `code` carries the stream's gRPC status so that CuratorConnection.call can
 * tell a leader that went away (UNAVAILABLE) from a refusal.
 */
export class CuratorStreamError extends RoleserveError {
  /** The gRPC status of the failure; undefined when the curator ended the stream. */
  readonly code: number | undefined;

  constructor(
    /** The RPC, e.g. "Curator.Watch". */
    readonly method: string,
    cause?: unknown,
  ) {
    super(
      cause === undefined
        ? `${method}: the curator ended the stream`
        : `${method}: stream failed: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
    const code = (cause as { code?: unknown } | undefined)?.code;
    this.code = typeof code === "number" ? code : undefined;
  }
}

/** A declared workload cannot be run: a configuration error, found before anything starts. */
export class InvalidWorkloadError extends RoleserveError {
  constructor(
    /** The workload's name as declared (possibly the offending empty or invalid one). */
    readonly workload: string,
    why: string,
  ) {
    super(`workload ${JSON.stringify(workload)}: ${why}`);
  }
}

/**
 * The curator leader stopped answering heartbeats (it hangs, or is cut off
 * without the connection breaking); the worker restarts and finds the
 * leader again.
 */
export class HeartbeatTimeoutError extends RoleserveError {
  constructor(readonly timeoutMs: number) {
    super(
      `Curator.Heartbeat: no answer from the curator for ${timeoutMs} ms; giving the leader up`,
    );
  }
}

/**
 * Why a stream on the curator leader was ended by this node: its
 * CuratorConnection gave that leader up (a worker found it failed or
 * unresponsive: `cause`), and the node's streams move to the next leader.
 * Its `code` is UNAVAILABLE, as grpc-js' would be had the connection
 * dropped: a stream still being opened is opened again on the next leader
 * (CuratorConnection.call retries it), and one already open fails its
 * worker, which the supervisor restarts. Without the code, a worker whose
 * stream was being opened on a leader that another worker had just found
 * dead failed instead of retrying (hundreds per failover of 5,000 simulated
 * nodes).
 */
export class LeaderGivenUpError extends RoleserveError {
  readonly code = status.UNAVAILABLE;

  constructor(
    /** The leader given up. */
    readonly leaderNodeId: string,
    cause: unknown,
  ) {
    super(
      `leader ${leaderNodeId} given up: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
  }
}

/**
 * The node's credentials each read fine, but do not belong together: the key
 * is not the certificate's, the certificate is not a node certificate, or the
 * CA did not issue it. Names the directory, so the operator knows whose
 * files to look at.
 */
export class CredentialsMismatchError extends RoleserveError {
  constructor(
    /** The credentials directory (`data/node/credentials`). */
    readonly path: string,
    cause: unknown,
  ) {
    super(
      `the node credentials in ${path} do not belong together: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
  }
}
