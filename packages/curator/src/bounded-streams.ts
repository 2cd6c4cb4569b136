/**
 * Long-lived server streams of one kind, bounded: at most so many per
 * connection and so many in all, each ended when its call is cancelled or
 * when the server stops, and each releasing everything it holds when it
 * ends.
 *
 * The server's stop signal gets one abort listener for all the streams, not
 * one per stream: thousands of listeners on one long-lived AbortSignal make
 * each removal walk all of them (quadratic work as they are cancelled) and
 * make Node print `MaxListenersExceededWarning` past ten. Each stream has a
 * signal of its own instead, for whatever it waits on.
 */
import { status, type ServerWritableStream } from "@grpc/grpc-js";
import { CuratorError } from "./errors";

/** How many streams of one kind may be open at once. */
export interface StreamCaps {
  /** On one connection (one client's TCP connection, told apart by its peer address). */
  readonly perConnection: number;
  /** On the whole server. */
  readonly total: number;
}

/** A stream was refused because `limit` streams of its kind are open already. Answered RESOURCE_EXHAUSTED. */
export class TooManyStreamsError extends CuratorError {
  constructor(
    readonly what: string,
    readonly scope: "connection" | "server",
    readonly limit: number,
  ) {
    super(
      status.RESOURCE_EXHAUSTED,
      `too many open ${what} streams: this ${scope} has ${limit}, the most it may have; ` +
        `close one, or retry later`,
    );
  }
}

/** The server is stopping: no new stream starts. Answered UNAVAILABLE, so clients go elsewhere. */
export class StreamsClosedError extends CuratorError {
  constructor(what: string) {
    super(status.UNAVAILABLE, `not accepting ${what} streams: this server is stopping`);
  }
}

/** What a bounded stream needs from its grpc-js call: its peer, and whether and when it is cancelled. */
export type StreamCall = Pick<
  ServerWritableStream<unknown, unknown>,
  "getPeer" | "cancelled" | "once" | "removeListener"
>;

/**
 * The open streams of one kind on one server.
 *
 * @example
 * const streams = new BoundedStreams("GetCurrentLeader", { perConnection: 16, total: 1024 }, signal);
 * // in the handler:
 * await streams.serve(call, async (ended) => {
 *   const watcher = value.watch();
 *   try { for (;;) call.write(await watcher.get({ signal: ended })); }
 *   catch (e) { if (!ended.aborted) throw e; }
 *   finally { watcher.close(); }
 * });
 */
export class BoundedStreams {
  /** The abort controller of every open stream. */
  private readonly open = new Set<AbortController>();
  /** Open streams per connection (peer address); connections without any are not kept. */
  private readonly perConnection = new Map<string, number>();
  private closed = false;
  private readonly drainWaiters: Array<() => void> = [];

  /**
   * @param what - the kind of stream, for error messages (e.g. "GetCurrentLeader").
   * @param caps - the most streams at once, per connection and in all.
   * @param signal - when it aborts, every open stream ends and no new one starts.
   */
  constructor(
    readonly what: string,
    readonly caps: StreamCaps,
    signal?: AbortSignal,
  ) {
    if (signal?.aborted) this.closed = true;
    else signal?.addEventListener("abort", () => this.close(), { once: true });
  }

  /** Streams open now. */
  get size(): number {
    return this.open.size;
  }

  /**
   * Runs `body` as the stream of `call`, if the caps allow one more; throws
   * TooManyStreamsError if not, StreamsClosedError once the server stops.
   * `body` gets a signal that aborts when the call is cancelled or the
   * server stops, and must return (or throw) soon after. The stream counts
   * until `body` settles; then nothing of it stays here.
   */
  async serve(call: StreamCall, body: (ended: AbortSignal) => Promise<void>): Promise<void> {
    if (this.closed) throw new StreamsClosedError(this.what);
    const peer = call.getPeer();
    const onConnection = this.perConnection.get(peer) ?? 0;
    if (onConnection >= this.caps.perConnection) {
      throw new TooManyStreamsError(this.what, "connection", this.caps.perConnection);
    }
    if (this.open.size >= this.caps.total) {
      throw new TooManyStreamsError(this.what, "server", this.caps.total);
    }
    const stream = new AbortController();
    const end = () => stream.abort();
    this.open.add(stream);
    this.perConnection.set(peer, onConnection + 1);
    call.once("cancelled", end);
    // Cancelled before we listened: grpc-js emits "cancelled" only once.
    if (call.cancelled) end();
    try {
      await body(stream.signal);
    } finally {
      call.removeListener("cancelled", end);
      this.open.delete(stream);
      const left = (this.perConnection.get(peer) ?? 1) - 1;
      if (left > 0) this.perConnection.set(peer, left);
      else this.perConnection.delete(peer);
      if (this.open.size === 0) this.drainWaiters.splice(0).forEach((resolve) => resolve());
    }
  }

  /** Ends every open stream and refuses new ones (what the signal's abort does). */
  close(): void {
    this.closed = true;
    for (const stream of this.open) stream.abort();
  }

  /** Resolves once no stream is open (at once if none is). */
  drained(): Promise<void> {
    if (this.open.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }
}
