/**
 * What the node's gRPC services share: the log streams of Debug.GetLogs and
 * NodeManagement.Logs (a backlog, then followed live, in bounded batches,
 * with backpressure, ended when a reader falls too far behind), and how a
 * failed call becomes a gRPC status.
 */
import { status, type ServerWritableStream } from "@grpc/grpc-js";
import {
  clipped,
  CuratorError,
  InvalidArgumentError,
  quoted,
  type BoundedStreams,
} from "@metropolis/curator";
import type { api } from "@metropolis/proto";
import type { LogEntry, Supervisor } from "@metropolis/supervisor";
import { NodeError } from "./errors";

/** A server stream of log entry batches (GetLogsResponse and LogsResponse have this shape). */
export type LogsCall = ServerWritableStream<unknown, { entries: api.LogEntry[] }>;

/**
 * Most log entries sent in one GetLogs response. A backlog is sent in
 * batches of at most this many (and at most {@link maxLogBatchBytes}); so are
 * followed entries, which are gathered per event-loop tick.
 */
export const maxLogEntriesPerResponse = 500;

/** Rough bound on the encoded size of one GetLogs response, well below gRPC's 4 MiB default. */
export const maxLogBatchBytes = 1 << 20;

/**
 * Most followed entries that may wait for a slow client. Past it the stream
 * ends with RESOURCE_EXHAUSTED rather than letting the node's memory grow
 * with the backlog of one reader.
 */
export const maxPendingFollowedEntries = 10_000;

/**
 * Longest DN prefix GetLogs accepts. DNs are names of at most 64 characters
 * joined by dots, a handful deep; a longer prefix matches nothing, and would
 * only cost a comparison per log entry.
 */
export const maxDnPrefixLength = 1024;

/** Refuses a DN (in request field `field`) longer than {@link maxDnPrefixLength}. */
export function checkDnPrefix(dn: string, field: string): void {
  if (dn.length > maxDnPrefixLength) {
    throw new InvalidArgumentError(
      `${field} ${quoted(dn)} is longer than ${maxDnPrefixLength} characters`,
    );
  }
}

/** A followed GetLogs stream fell too far behind and was ended. Answered RESOURCE_EXHAUSTED. */
export class LogFollowOverflowError extends NodeError {
  /** The gRPC status it is answered with (see toStatus). */
  readonly code = status.RESOURCE_EXHAUSTED;

  constructor(limit: number) {
    super(
      `client reads logs too slowly: more than ${limit} entries were waiting; reconnect with a tail`,
    );
  }
}

/** A gRPC status for a failed call: typed errors keep their code; anything else is INTERNAL. */
export function toStatus(e: unknown, method: string): { code: status; details: string } {
  // Clipped: a status message is an HTTP/2 header, and must stay small enough to send.
  if (e instanceof CuratorError || e instanceof LogFollowOverflowError) {
    return { code: e.code, details: clipped(e.message) };
  }
  const message = e instanceof Error ? e.message : String(e);
  return { code: status.INTERNAL, details: clipped(`${method} failed: ${message}`) };
}

/** Runs a server-stream handler: ends the call on success, answers a status on failure. */
export function serverStream<Req, Res>(
  method: string,
  handle: (call: ServerWritableStream<Req, Res>) => Promise<void>,
): (call: ServerWritableStream<Req, Res>) => void {
  return (call) => {
    handle(call).then(
      () => {
        if (!call.cancelled && !call.writableEnded) call.end();
      },
      // grpc-js answers a server stream with the status of an emitted error.
      (e: unknown) => call.emit("error", toStatus(e, method)),
    );
  };
}

/** Structured fields as JSON; never throws (a circular or odd value is described instead). */
function metaJson(meta: Record<string, unknown> | undefined): string {
  if (!meta) return "";
  try {
    return JSON.stringify(meta, (_key, value: unknown) => {
      if (typeof value === "bigint") return value.toString();
      if (value instanceof Error) return { name: value.name, message: value.message };
      return value;
    });
  } catch (e) {
    return JSON.stringify({ unserializable: e instanceof Error ? e.message : String(e) });
  }
}

/** One log tree entry as the wire's LogEntry. */
export function toApiLogEntry(e: LogEntry): api.LogEntry {
  return {
    dn: e.dn,
    level: e.level,
    message: e.message,
    time: new Date(e.time),
    metaJson: metaJson(e.meta),
  };
}

/** True when `dn` is `prefix` or below it (`root.role` covers `root.role.x`, not `root.roles`). */
export function dnMatches(prefix: string, dn: string): boolean {
  return prefix === "" || dn === prefix || dn.startsWith(prefix + ".");
}

/** Approximate encoded size of an entry: its strings plus field overhead. */
function entrySize(e: api.LogEntry): number {
  return e.dn.length + e.level.length + e.message.length + e.metaJson.length + 32;
}

/** Takes the next batch off the front of `queue`: bounded in count and size, never empty. */
function takeBatch(queue: api.LogEntry[]): api.LogEntry[] {
  let bytes = 0;
  let n = 0;
  while (n < queue.length && n < maxLogEntriesPerResponse) {
    bytes += entrySize(queue[n]);
    if (n > 0 && bytes > maxLogBatchBytes) break;
    n++;
  }
  return queue.splice(0, n);
}

/**
 * Writes queued entries to a log stream (Debug.GetLogs, NodeManagement.Logs) in batches, in order, respecting
 * the stream's backpressure: once a write is refused (returns false),
 * nothing more is written until the stream drains.
 */
export class LogWriter {
  private readonly queue: api.LogEntry[] = [];
  private scheduled = false;
  private draining = false;
  private emptied: (() => void) | undefined;
  private closed = false;

  constructor(private readonly call: LogsCall) {}

  /** Entries queued and not yet handed to the stream. */
  get pending(): number {
    return this.queue.length;
  }

  /** Queues entries and writes what it can now. */
  write(entries: readonly api.LogEntry[]): void {
    for (const e of entries) this.queue.push(e);
    this.flush();
  }

  /**
   * Queues one entry and writes on the next turn of the event loop: lines
   * logged in one tick go out in one response, and the logging runnable
   * never waits on the network.
   */
  writeSoon(entry: api.LogEntry): void {
    this.queue.push(entry);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  /** Resolves once everything queued has been handed to the stream, or the client is gone. */
  written(): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        this.call.removeListener("cancelled", done);
        this.emptied = undefined;
        resolve();
      };
      this.call.once("cancelled", done);
      this.emptied = done;
      this.flush();
    });
  }

  /** Drops what is queued and writes nothing more (the call is ending with an error). */
  close(): void {
    this.closed = true;
    this.queue.length = 0;
  }

  private flush(): void {
    while (this.queue.length > 0 && !this.draining && this.open()) {
      if (!this.call.write({ entries: takeBatch(this.queue) })) {
        this.draining = true;
        this.call.once("drain", () => {
          this.draining = false;
          this.flush();
        });
      }
    }
    if (this.queue.length === 0 || !this.open()) this.emptied?.();
  }

  private open(): boolean {
    return !this.closed && !this.call.cancelled && !this.call.writableEnded;
  }
}

/** What a log stream sends: its backlog, then (with `follow`) new entries that match. */
export interface LogSelection {
  /** The backlog to send first, oldest first (already filtered and cut to its tail). */
  backlog: () => api.LogEntry[];
  /** Whether a new entry is sent (with `follow`). */
  matches: (entry: LogEntry) => boolean;
  /** Keep the stream open and send new matching entries until the client cancels or `streams` end. */
  follow: boolean;
}

/**
 * Serves a log stream (Debug.GetLogs, NodeManagement.Logs): the backlog,
 * then, with `follow`, every new matching entry, as one of `streams` (so
 * that both services' followers are capped together), until the client
 * cancels, the streams end, or the client falls more than
 * {@link maxPendingFollowedEntries} behind (LogFollowOverflowError).
 */
export async function streamLogs(
  supervisor: Supervisor,
  streams: BoundedStreams,
  call: LogsCall,
  selection: LogSelection,
): Promise<void> {
  const writer = new LogWriter(call);
  if (!selection.follow) {
    writer.write(selection.backlog());
    return writer.written();
  }
  await streams.serve(call, (ended) => followLogs(supervisor, selection, writer, ended));
}

/** The follow part of a log stream: backlog and new entries until `ended` aborts or the client falls behind. */
async function followLogs(
  supervisor: Supervisor,
  selection: LogSelection,
  writer: LogWriter,
  ended: AbortSignal,
): Promise<void> {
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  let overflow = false;
  let limit = 0;
  // Subscribing and reading the backlog happen in one synchronous step, so
  // no entry can fall between them or be sent twice.
  const unsubscribe = supervisor.onLog((entry) => {
    if (overflow || !selection.matches(entry)) return;
    if (writer.pending >= limit) {
      overflow = true;
      stop();
      return;
    }
    writer.writeSoon(toApiLogEntry(entry));
  });
  writer.write(selection.backlog());
  limit = writer.pending + maxPendingFollowedEntries;

  // `ended` is this stream's own signal: one listener, removed below.
  ended.addEventListener("abort", stop, { once: true });
  if (ended.aborted) stop();
  try {
    await stopped;
  } finally {
    unsubscribe();
    ended.removeEventListener("abort", stop);
  }
  if (overflow) {
    writer.close();
    throw new LogFollowOverflowError(maxPendingFollowedEntries);
  }
  await writer.written();
}
