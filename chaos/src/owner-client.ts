/**
 * The workload's connection to the cluster as its owner: the Management API
 * of whichever curator leads, reached through @metropolis/curator's
 * CuratorConnection (ask any consensus member who leads, dial the leader
 * expecting its certificate), like metroctl.
 *
 * Unlike metroctl it never retries a call once the request may have reached
 * a leader: a write retried after a timeout could take effect twice, at two
 * times, and the history would not say so. One `attempt` is one request (the
 * search for the leader before it may retry, since nothing was sent yet),
 * and its error says whether the operation definitely did not happen
 * (`failed`) or may have (`unknown`). After any error that is not a definite
 * refusal by a serving leader, the leader is sought again on the next call,
 * so a frozen or dead leader is left behind.
 */
import {
  Metadata,
  status,
  type CallOptions,
  type ClientUnaryCall,
  type ServiceError,
} from "@grpc/grpc-js";
import {
  CuratorConnection,
  NoLeaderError,
  type CuratorAddress,
  type LeaderClients,
} from "@metropolis/curator";
import type { OwnerCredentials } from "@metropolis/metroctl";
import type { Outcome } from "./history";

type Callback<Res> = (err: ServiceError | null, res: Res) => void;

/** Issues one unary call on the leader's clients. */
export type Invoke<Res> = (
  leader: LeaderClients,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: Callback<Res>,
) => ClientUnaryCall;

/** One attempt that did not succeed, with what it means for the history. */
export class AttemptError extends Error {
  constructor(
    readonly outcome: Exclude<Outcome, "ok">,
    readonly detail: string,
    options?: ErrorOptions,
  ) {
    super(`${outcome}: ${detail}`, options);
    this.name = "AttemptError";
  }
}

/** Refusals after which the operation certainly did not happen. */
const definiteRefusals = new Set<number>([
  status.INVALID_ARGUMENT,
  status.PERMISSION_DENIED,
  status.FAILED_PRECONDITION,
  status.NOT_FOUND,
  status.ALREADY_EXISTS,
  status.UNAUTHENTICATED,
  // A follower does not serve the Management API and never forwards: nothing was applied.
  status.UNIMPLEMENTED,
  // The curator's compare-and-swap gave up after conflicting writes: nothing committed.
  status.ABORTED,
]);

/**
 * UNAVAILABLE answers the curator itself gives only when its guarded
 * transaction did not commit (LostLeadershipError: the guard failed; a
 * handed-over leadership), and grpc-js's own when it never connected. Any other UNAVAILABLE (a dropped connection, a
 * refused one after the request was written) may hide an applied write.
 */
const notCommitted = [
  /^curator lost leadership/,
  /^curator leadership handed over/,
  // grpc-js: the channel never connected, so the request was never written.
  /^No connection established/,
];

/** Refusals of the request by a serving leader: it still leads, keep talking to it. */
const leaderRefusals = new Set<number>([
  status.INVALID_ARGUMENT,
  status.PERMISSION_DENIED,
  status.FAILED_PRECONDITION,
  status.NOT_FOUND,
  status.ALREADY_EXISTS,
  status.ABORTED,
]);

function isLeaderRefusal(e: unknown): boolean {
  return isServiceError(e) && leaderRefusals.has(e.code);
}

function isServiceError(e: unknown): e is ServiceError {
  return e instanceof Error && "code" in e && typeof e.code === "number";
}

/**
 * What error `e` of one call means: `failed` when the operation certainly
 * did not happen, `unknown` when it may have.
 */
export function classify(e: unknown): AttemptError {
  if (e instanceof AttemptError) return e;
  if (e instanceof NoLeaderError) {
    // No leader was found: no request was sent.
    return new AttemptError("failed", `no leader: ${e.message}`, { cause: e });
  }
  if (isServiceError(e)) {
    const name = status[e.code] ?? String(e.code);
    const detail = `${name}: ${e.details}`;
    if (definiteRefusals.has(e.code)) return new AttemptError("failed", detail, { cause: e });
    if (e.code === status.UNAVAILABLE && notCommitted.some((re) => re.test(e.details))) {
      return new AttemptError("failed", detail, { cause: e });
    }
    // grpc-js's own deadline message says where the call was when it passed: still resolving
    // the name or waiting for an LB pick means it never had a connection, so nothing was sent.
    // A bare "Deadline exceeded" is the server's answer: the handler may still have committed
    // (a chaos run saw such a write become visible).
    if (
      e.code === status.DEADLINE_EXCEEDED &&
      /Waiting for LB pick|waiting for name resolution/.test(e.details) &&
      !e.details.includes("remote_addr=")
    ) {
      return new AttemptError("failed", detail, { cause: e });
    }
    return new AttemptError("unknown", detail, { cause: e });
  }
  return new AttemptError("unknown", e instanceof Error ? e.message : String(e), { cause: e });
}

/** An owner's single-attempt Management client; see the module comment. */
export class OwnerClient {
  private readonly connection: CuratorConnection;

  constructor(endpoints: readonly CuratorAddress[], owner: OwnerCredentials) {
    this.connection = new CuratorConnection({
      endpoints,
      ca: owner.ca,
      identity: { cert: owner.cert, key: owner.key },
      keepalive: { timeMs: 2_000, timeoutMs: 2_000 },
    });
  }

  /**
   * One call on the leader within `timeoutMs` (finding the leader included).
   * `onSent` is told the node ID of the curator the request goes to, when it is sent.
   * @throws AttemptError saying whether the operation may have happened.
   */
  async attempt<Res>(
    invoke: Invoke<Res>,
    timeoutMs: number,
    onSent?: (nodeId: string) => void,
  ): Promise<Res> {
    const deadline = Date.now() + timeoutMs;
    let sent = false;
    try {
      return await this.connection.call(
        (leader) => {
          sent = true;
          onSent?.(leader.endpoint.nodeId);
          return new Promise<Res>((resolve, reject) =>
            invoke(leader, new Metadata(), { deadline }, (err, res) => {
              // Not retryable: wrapped, so that CuratorConnection gives it back as it is.
              if (err) reject(classify(err));
              else resolve(res);
            }),
          );
        },
        { timeoutMs },
      );
    } catch (e) {
      const error = classify(e);
      // Anything but a serving leader's refusal of the request itself (a follower's
      // UNIMPLEMENTED, a refused connection, a timeout): look for the leader again next time.
      if (!isLeaderRefusal(error.cause)) {
        this.connection.close();
        // CuratorConnection asks the curators one after the other, each for up to the whole
        // deadline: a frozen one first in line would make every attempt time out. Rotate.
        const [first, ...rest] = this.connection.knownEndpoints;
        if (first) this.connection.setEndpoints([...rest, first]);
      }
      if (!sent && error.outcome === "unknown") {
        return Promise.reject(new AttemptError("failed", `no request sent: ${error.detail}`));
      }
      throw error;
    }
  }

  /** Closes every channel. */
  close(): void {
    this.connection.close();
  }
}
