/**
 * How the roleserver's workers talk to the curator leader: through the
 * node's CuratorConnection, which finds the leader and retries while it is
 * unavailable, but bounded by the worker's run so that a worker being
 * stopped never waits for a curator that does not answer.
 *
 * Streams (Watch, Heartbeat) are opened inside `CuratorConnection.call` and
 * count as open once their first message arrives: a leader that is gone
 * before then is found again and the stream reopened, while a stream that
 * fails later ends the worker (CuratorStreamError), which the supervisor
 * restarts.
 */
import type { ClientDuplexStream, ClientReadableStream } from "@grpc/grpc-js";
import type { CuratorConnection, LeaderClients } from "@metropolis/curator";
import type { curator } from "@metropolis/proto";
import { abortable, answerDeadline, withoutStackTrace } from "@metropolis/supervisor";
import { CuratorStreamError, LeaderGivenUpError } from "./errors";

/**
 * `connection.call(fn)` for a worker: ends with the abort reason when
 * `signal` aborts. CuratorConnection.call checks its signal only between
 * attempts, and looking for a leader can take its whole timeout.
 */
export function callCurator<T>(
  connection: CuratorConnection,
  fn: (leader: LeaderClients) => Promise<T>,
  signal: AbortSignal,
): Promise<T> {
  return abortable(connection.call(fn, { signal }), signal);
}

/** A gRPC call of the curator that the server streams messages on. */
export type ReadableCall<Res> = ClientReadableStream<Res> | ClientDuplexStream<unknown, Res>;

/**
 * A curator stream read one message at a time. grpc-js pushes messages as
 * events; a worker wants to await the next one, and to learn of a failure
 * even while it is not reading (between heartbeats), so messages are queued
 * and the first failure or end is kept.
 */
export class CuratorStream<Res, C extends ReadableCall<Res> = ReadableCall<Res>> {
  /**
   * Never resolves; rejects with a CuratorStreamError once the stream failed
   * or ended. Not to be raced in a loop: each `Promise.race` leaves a
   * reaction on it (about 300 bytes) for as long as the stream lives; wait
   * with {@link sleep} instead.
   */
  readonly ended: Promise<never>;
  private readonly queue: Res[] = [];
  private waiter: { resolve: (m: Res) => void; reject: (e: unknown) => void } | undefined;
  /** Ends the pending {@link sleep} with the stream's failure. */
  private sleeper: ((e: CuratorStreamError) => void) | undefined;
  private failure: CuratorStreamError | undefined;
  private cancelled = false;
  private fail!: (e: CuratorStreamError) => void;

  constructor(
    /** The underlying call, e.g. to write further requests of a bidirectional stream. */
    readonly call: C,
    /** The RPC, for errors and logs, e.g. "Curator.Watch". */
    readonly method: string,
  ) {
    this.ended = new Promise<never>((_, reject) => {
      this.fail = (e) => {
        if (this.failure) return;
        this.failure = e;
        reject(e);
        const waiter = this.waiter;
        this.waiter = undefined;
        waiter?.reject(e);
        this.sleeper?.(e);
      };
    });
    // Nobody has to listen: next() reports the failure too.
    this.ended.catch(() => undefined);
    call.on("data", (message: Res) => {
      const waiter = this.waiter;
      if (waiter) {
        this.waiter = undefined;
        waiter.resolve(message);
      } else this.queue.push(message);
    });
    // grpc-js reports our own cancel() as a CANCELLED error; that is not news.
    // The stream's errors are made without a stack trace: made in an event
    // emitter's callback, their frames say nothing (the cause, grpc-js's
    // error, has the call's origin), and after a failover every node makes
    // several at once (see withoutStackTrace).
    call.on("error", (e: Error) => {
      if (!this.cancelled) this.fail(withoutStackTrace(() => new CuratorStreamError(method, e)));
    });
    call.on("end", () => this.fail(withoutStackTrace(() => new CuratorStreamError(method))));
  }

  /** The next message; rejects with CuratorStreamError once the stream is over, or with the abort reason. */
  next(signal: AbortSignal): Promise<Res> {
    const queued = this.queue.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (this.failure) return Promise.reject(this.failure);
    if (this.waiter) return Promise.reject(new Error(`${this.method}: concurrent next()`));
    return abortable(
      new Promise<Res>((resolve, reject) => {
        this.waiter = { resolve, reject };
      }),
      signal,
    ).finally(() => {
      // An aborted next() must not swallow the message that arrives later.
      this.waiter = undefined;
    });
  }

  /**
   * Waits `ms`, unless the stream fails or ends first (rejects at once with
   * its CuratorStreamError) or `signal` aborts (rejects with its reason):
   * a worker idle between messages it sends learns of a broken stream now,
   * not when it next writes. Leaves nothing on the stream once over. The
   * heartbeat raced {@link ended} against its sleep every beat, which left
   * a reaction on the stream per beat (5 MiB a day per node).
   */
  sleep(ms: number, signal: AbortSignal): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.sleeper) return Promise.reject(new Error(`${this.method}: concurrent sleep()`));
    return new Promise<void>((resolve, reject) => {
      const end = (error?: unknown) => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        this.sleeper = undefined;
        if (error === undefined) resolve();
        else reject(error);
      };
      const onAbort = () => end(signal.reason);
      const timer = setTimeout(end, ms);
      signal.addEventListener("abort", onAbort, { once: true });
      this.sleeper = end;
    });
  }

  /**
   * Ends the call (the server sees the client cancel it); the stream fails
   * with `why`. Idempotent.
   */
  cancel(why?: Error): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.call.cancel();
    this.fail(
      withoutStackTrace(
        () => new CuratorStreamError(this.method, why ?? new Error("cancelled by the client")),
      ),
    );
  }
}

/** How long {@link openStream} waits for a stream's first message by default. */
export const defaultFirstMessageTimeoutMs = 30_000;

/**
 * Opens a stream on the current leader and waits for its first message. A
 * leader that goes away before it answers is found again and the stream
 * reopened (CuratorConnection.call); other failures reject. A leader that
 * keeps the stream open but sends nothing within `firstMessageTimeoutMs`
 * fails it (CuratorStreamError) and is given up as unresponsive
 * (CuratorConnection.leaderUnresponsive): a live connection to a handler
 * that is stuck would otherwise hold the worker forever (the scale
 * simulator saw nodes stay unhealthy for minutes after a failover that way).
 *
 * The stream ends (cancelled, failing with why) when the connection gives
 * its leader up, whoever noticed: one worker's finding that the leader
 * failed or stopped answering moves every worker of the node.
 */
export function openStream<Res, C extends ReadableCall<Res>>(
  connection: CuratorConnection,
  method: string,
  open: (leader: LeaderClients) => C,
  signal: AbortSignal,
  firstMessageTimeoutMs = defaultFirstMessageTimeoutMs,
): Promise<{ stream: CuratorStream<Res, C>; first: Res; leader: LeaderClients }> {
  return callCurator(
    connection,
    async (leader) => {
      // Opened without capturing a stack: grpc-js keeps one per call to
      // append to its error should the call end with an error status, and
      // formats it then. Every stream of a node ends that way at a failover
      // or a cancel, at once on thousands of nodes (the formatting was 2–3 %
      // of a node host's CPU after a failover), and the frames would only
      // say what `method` already does.
      const stream = new CuratorStream<Res, C>(
        withoutStackTrace(() => open(leader)),
        method,
      );
      // However late the stream breaks, the connection hears of it (a
      // failed leader breaks them all), and the worker's next call goes to
      // the next leader; and the other way round.
      const onDropped = () =>
        stream.cancel(new LeaderGivenUpError(leader.endpoint.nodeId, leader.dropped.reason));
      leader.dropped.addEventListener("abort", onDropped, { once: true });
      stream.ended.catch((e: CuratorStreamError) => {
        leader.dropped.removeEventListener("abort", onDropped);
        connection.leaderFailed(leader, e);
      });
      const deadline = answerDeadline(
        firstMessageTimeoutMs,
        () =>
          new CuratorStreamError(
            method,
            new Error(`no first message within ${firstMessageTimeoutMs} ms`),
          ),
        signal,
      );
      try {
        return { stream, first: await stream.next(deadline.signal), leader };
      } catch (e) {
        stream.cancel();
        if (deadline.signal.aborted && !signal.aborted) {
          connection.leaderUnresponsive(leader, deadline.signal.reason);
          throw deadline.signal.reason;
        }
        throw e;
      } finally {
        deadline.clear();
      }
    },
    signal,
  );
}

/** A Curator.Watch stream. */
export type WatchStream = CuratorStream<
  curator.WatchResponse,
  ClientReadableStream<curator.WatchResponse>
>;

/** Opens Curator.Watch for `kind` on the current leader; see {@link openStream}. */
export function openWatch(
  connection: CuratorConnection,
  kind: curator.WatchRequest["kind"],
  signal: AbortSignal,
): Promise<{ stream: WatchStream; first: curator.WatchResponse; leader: LeaderClients }> {
  return openStream(
    connection,
    "Curator.Watch",
    (leader) => leader.curator.watch({ kind }),
    signal,
  );
}
