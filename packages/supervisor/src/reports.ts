/**
 * Supervisor reports, as OTP's SASL supervisor, progress and crash reports:
 * the tree tells its ReportHub what happens (a runnable started, became
 * healthy, was done, died; a restart was scheduled; a runnable was given up
 * on and its failure escalated), and the hub keeps the last reports in a
 * bounded history and hands them to subscribers.
 *
 * Costs: with no subscriber, recording a report allocates nothing (the
 * history is a ring of columns, materialised only when read); with a history
 * of 0 too, nothing is recorded at all. A subscriber gets one record per
 * report, and its queue is bounded (drop oldest, counted in `dropped`).
 */
import {
  maxReportErrorMessageChars,
  maxReportErrorNameChars,
  maxReportErrorStackChars,
  type ReportError,
  type ReportsOptions,
  type SupervisorReport,
} from "./report-types";
import { joinDn } from "./names";
import type { TreeNode } from "./tree-node";
import type { NodeState } from "./types";

/** Default of `SupervisorOptions.reportHistory`. */
export const defaultReportHistory = 1000;
/** Default of `ReportsOptions.bufferSize`. */
export const defaultReportBufferSize = 1000;

/** True when `dn` is `prefix` or below it. */
export function dnCovers(prefix: string, dn: string): boolean {
  return prefix === "" || dn === prefix || (dn.startsWith(prefix) && dn[prefix.length] === ".");
}

function clip(s: string, max: number): string {
  return s.length <= max ? s : s.slice(0, max - 1) + "…";
}

/** An error as a report carries it: name, message and stack, each cut to its bound. */
export function reportError(e: Error): ReportError {
  const out: ReportError = {
    name: clip(String(e.name), maxReportErrorNameChars),
    message: clip(String(e.message), maxReportErrorMessageChars),
  };
  if (typeof e.stack === "string") out.stack = clip(e.stack, maxReportErrorStackChars);
  return out;
}

/** Report kinds by their code in the history's columns. */
const enum Kind {
  Started = 0,
  Healthy = 1,
  Done = 2,
  Died = 3,
  RestartScheduled = 4,
  GivenUp = 5,
  Escalated = 6,
}

/** What only rare reports carry. */
interface Extra {
  error?: ReportError;
  to?: string;
}

/** A report from its columns: what the hub records, made into a record only when read. */
function materialise(
  seq: number,
  kind: Kind,
  dn: string,
  time: number,
  a: number,
  b: number,
  extra: Extra | undefined,
): SupervisorReport {
  switch (kind) {
    case Kind.Started:
      return { kind: "started", seq, dn, time, restarts: a };
    case Kind.Healthy:
      return { kind: "healthy", seq, dn, time };
    case Kind.Done:
      return { kind: "done", seq, dn, time };
    case Kind.Died:
      return { kind: "died", seq, dn, time, error: { ...extra!.error! } };
    case Kind.RestartScheduled:
      return { kind: "restartScheduled", seq, dn, time, delayMs: a, attempt: b };
    case Kind.GivenUp: {
      const r: SupervisorReport = { kind: "givenUp", seq, dn, time, maxRestarts: a, periodMs: b };
      if (extra?.error) r.error = { ...extra.error };
      return r;
    }
    case Kind.Escalated: {
      const r: SupervisorReport = { kind: "escalated", seq, dn, time, error: { ...extra!.error! } };
      if (extra?.to !== undefined) r.to = extra.to;
      return r;
    }
  }
}

/**
 * The history: a fixed-capacity ring kept as columns (typed arrays, and the
 * DNs as their parent's DN and last name), so that recording a report
 * allocates nothing; the oldest is overwritten first. Reports are numbered
 * one apart, so a slot's `seq` follows from its position.
 */
class ReportRing {
  private readonly kinds: Uint8Array;
  private readonly times: Float64Array;
  private readonly as: Float64Array;
  private readonly bs: Float64Array;
  /** Each report's DN, as its parent's DN and its last name (see joinDn). */
  private readonly parentDns: string[];
  private readonly names: string[];
  /** Only the slots of rare reports (died, givenUp, escalated) hold anything. */
  private readonly extras: (Extra | undefined)[];
  private next = 0;
  private size = 0;
  /** `seq` of the newest report recorded. */
  private lastSeq = 0;

  constructor(readonly capacity: number) {
    this.kinds = new Uint8Array(capacity);
    this.times = new Float64Array(capacity);
    this.as = new Float64Array(capacity);
    this.bs = new Float64Array(capacity);
    this.parentDns = new Array<string>(capacity).fill("");
    this.names = new Array<string>(capacity).fill("");
    this.extras = new Array<Extra | undefined>(capacity).fill(undefined);
  }

  push(
    seq: number,
    kind: Kind,
    parentDn: string,
    name: string,
    time: number,
    a: number,
    b: number,
    extra: Extra | undefined,
  ): void {
    const i = this.next;
    this.kinds[i] = kind;
    this.parentDns[i] = parentDn;
    this.names[i] = name;
    this.times[i] = time;
    this.as[i] = a;
    this.bs[i] = b;
    if (extra !== undefined || this.extras[i] !== undefined) this.extras[i] = extra;
    this.next = i + 1 === this.capacity ? 0 : i + 1;
    if (this.size < this.capacity) this.size++;
    this.lastSeq = seq;
  }

  /** The reports oldest first, of `prefix`'s subtree only, the newest `tail` of them. */
  toArray(prefix: string, tail: number | undefined): SupervisorReport[] {
    const first = (this.next - this.size + this.capacity) % this.capacity;
    const matching: number[] = [];
    for (let k = 0; k < this.size; k++) {
      const i = (first + k) % this.capacity;
      if (prefix === "" || dnCovers(prefix, joinDn(this.parentDns[i], this.names[i])))
        matching.push(k);
    }
    const from = tail !== undefined && tail >= 0 ? Math.max(0, matching.length - tail) : 0;
    const firstSeq = this.lastSeq - this.size + 1;
    const out: SupervisorReport[] = [];
    for (let j = from; j < matching.length; j++) {
      const k = matching[j];
      const i = (first + k) % this.capacity;
      out.push(
        materialise(
          firstSeq + k,
          this.kinds[i],
          joinDn(this.parentDns[i], this.names[i]),
          this.times[i],
          this.as[i],
          this.bs[i],
          this.extras[i],
        ),
      );
    }
    return out;
  }
}

/** A bounded FIFO queue: past its capacity, the oldest item is dropped. */
class BoundedQueue<T> {
  private items: T[] = [];
  private head = 0;

  constructor(readonly capacity: number) {}

  get length(): number {
    return this.items.length - this.head;
  }

  /** Adds `item`; returns true when the oldest item was dropped for it. */
  push(item: T): boolean {
    this.items.push(item);
    if (this.length <= this.capacity) return false;
    this.shift();
    return true;
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head++];
    if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  clear(): void {
    this.items = [];
    this.head = 0;
  }
}

/** Receives reports as they are made, and the end of the tree. */
interface Subscriber {
  report(r: SupervisorReport): void;
  end(): void;
}

/** The tree's reports: numbered, kept in a bounded history, handed to subscribers. */
export class ReportHub {
  private seq = 0;
  private readonly history: ReportRing | undefined;
  private readonly subscribers = new Set<Subscriber>();
  private readonly changeListeners = new Set<() => void>();
  private ended = false;

  constructor(historySize: number = defaultReportHistory) {
    if (!Number.isInteger(historySize) || historySize < 0) {
      throw new RangeError(`reportHistory must be an integer >= 0, got ${historySize}`);
    }
    if (historySize > 0) this.history = new ReportRing(historySize);
  }

  /** Whether a report made now would go anywhere: the tree asks before making one. */
  get wanted(): boolean {
    return this.history !== undefined || this.subscribers.size > 0;
  }

  /** Whether anyone watches the tree change (watchTree). */
  get watched(): boolean {
    return this.changeListeners.size > 0;
  }

  /** Numbers, keeps and hands out one report. */
  private record(
    kind: Kind,
    parentDn: string,
    name: string,
    time: number,
    a: number,
    b: number,
    extra: Extra | undefined,
  ): void {
    const seq = ++this.seq;
    this.history?.push(seq, kind, parentDn, name, time, a, b, extra);
    if (this.subscribers.size === 0) return;
    const r = materialise(seq, kind, joinDn(parentDn, name), time, a, b, extra);
    for (const s of this.subscribers) s.report(r);
  }

  /**
   * `node` entered state `to` (at `node.since`): a started, healthy, done or
   * died report (a cancellation makes none), and a change for the watchers.
   */
  transition(node: TreeNode, to: NodeState, error: Error | undefined): void {
    if (this.history !== undefined || this.subscribers.size > 0) {
      switch (to) {
        case "new":
          this.record(
            Kind.Started,
            node.parentDn,
            node.name,
            node.since,
            node.restarts,
            0,
            undefined,
          );
          break;
        case "healthy":
          this.record(Kind.Healthy, node.parentDn, node.name, node.since, 0, 0, undefined);
          break;
        case "done":
          this.record(Kind.Done, node.parentDn, node.name, node.since, 0, 0, undefined);
          break;
        case "dead":
          this.record(Kind.Died, node.parentDn, node.name, node.since, 0, 0, {
            error: reportError(error ?? new Error("died")),
          });
          break;
        default:
          break;
      }
    }
    if (this.changeListeners.size > 0) this.changed();
  }

  /** At `time`, a restart of the failed `dn` was scheduled in `delayMs`; `attempt` as its backoff counts. */
  restartScheduled(dn: string, time: number, delayMs: number, attempt: number): void {
    if (this.wanted) this.record(Kind.RestartScheduled, "", dn, time, delayMs, attempt, undefined);
    if (this.changeListeners.size > 0) this.changed();
  }

  /** `dn` failed more often than its intensity allows; `error` is its last failure. */
  givenUp(dn: string, maxRestarts: number, periodMs: number, error: Error | undefined): void {
    if (this.wanted) {
      const extra = error ? { error: reportError(error) } : undefined;
      this.record(Kind.GivenUp, "", dn, Date.now(), maxRestarts, periodMs, extra);
    }
    if (this.changeListeners.size > 0) this.changed();
  }

  /** `dn`'s failure was propagated to `to` (undefined past the root) as `error`. */
  escalated(dn: string, to: string | undefined, error: Error): void {
    if (!this.wanted) return;
    const extra: Extra = { error: reportError(error) };
    if (to !== undefined) extra.to = to;
    this.record(Kind.Escalated, "", dn, Date.now(), 0, 0, extra);
  }

  /** Something in the tree changed (a transition, a scheduled restart, a give-up). */
  changed(): void {
    for (const cb of this.changeListeners) cb();
  }

  /** Called on every change until the returned function is called. */
  onChange(cb: () => void): () => void {
    this.changeListeners.add(cb);
    return () => this.changeListeners.delete(cb);
  }

  /** The tree has ended: subscribers finish once they read what is queued. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    for (const s of this.subscribers) s.end();
    this.subscribers.clear();
    for (const cb of this.changeListeners) cb();
  }

  get hasEnded(): boolean {
    return this.ended;
  }

  /** The history of `dnPrefix`'s subtree, oldest first; `tail` keeps the newest N. */
  recent(opts: { dnPrefix?: string; tail?: number } = {}): SupervisorReport[] {
    return this.history?.toArray(opts.dnPrefix ?? "", opts.tail) ?? [];
  }

  /** Calls `cb` with every report from now on; returns the unsubscribe function. */
  subscribe(cb: (r: SupervisorReport) => void): () => void {
    const s: Subscriber = { report: cb, end: () => undefined };
    if (!this.ended) this.subscribers.add(s);
    return () => this.subscribers.delete(s);
  }

  /** An async iterator over reports: optionally the history first, then live ones. */
  reader(opts: ReportsOptions = {}): AsyncIterableIterator<SupervisorReport> {
    const bufferSize = opts.bufferSize ?? defaultReportBufferSize;
    if (!Number.isInteger(bufferSize) || bufferSize < 1) {
      throw new RangeError(`bufferSize must be a positive integer, got ${bufferSize}`);
    }
    const prefix = opts.dnPrefix ?? "";
    const reader = new ReportReader(bufferSize, () => this.subscribers.delete(reader));
    // Reading the history and subscribing happen in one synchronous step: no
    // report can fall between them or come twice.
    if (opts.history !== undefined && opts.history !== false) {
      const tail = opts.history === true ? undefined : opts.history;
      for (const r of this.recent({ dnPrefix: prefix, tail })) reader.report(r);
    }
    if (prefix === "") {
      if (!this.ended) this.subscribers.add(reader);
    } else {
      const filtered: Subscriber & { reader: ReportReader } = {
        reader,
        report: (r) => dnCovers(prefix, r.dn) && reader.report(r),
        end: () => reader.end(),
      };
      reader.detach = () => this.subscribers.delete(filtered);
      if (!this.ended) this.subscribers.add(filtered);
    }
    if (this.ended) reader.end();
    return reader;
  }
}

/** One subscriber's bounded queue, read as an async iterator. */
class ReportReader implements AsyncIterableIterator<SupervisorReport>, Subscriber {
  private readonly queue: BoundedQueue<SupervisorReport>;
  private dropped = 0;
  private ended = false;
  private waiting: ((r: IteratorResult<SupervisorReport>) => void) | undefined;

  constructor(
    bufferSize: number,
    public detach: () => void,
  ) {
    this.queue = new BoundedQueue(bufferSize);
  }

  report(r: SupervisorReport): boolean {
    if (this.ended) return false;
    if (this.waiting) {
      const resolve = this.waiting;
      this.waiting = undefined;
      resolve({ value: this.withDropped({ ...r }), done: false });
      return true;
    }
    if (this.queue.push(r)) this.dropped++;
    return true;
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.detach();
    if (this.waiting && this.queue.length === 0) {
      const resolve = this.waiting;
      this.waiting = undefined;
      resolve({ value: undefined, done: true });
    }
  }

  next(): Promise<IteratorResult<SupervisorReport>> {
    const r = this.queue.shift();
    if (r) return Promise.resolve({ value: this.withDropped({ ...r }), done: false });
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => (this.waiting = resolve));
  }

  return(): Promise<IteratorResult<SupervisorReport>> {
    this.ended = true;
    this.detach();
    this.queue.clear();
    const resolve = this.waiting;
    this.waiting = undefined;
    resolve?.({ value: undefined, done: true });
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<SupervisorReport> {
    return this;
  }

  private withDropped(r: SupervisorReport): SupervisorReport {
    if (this.dropped > 0) {
      r.dropped = this.dropped;
      this.dropped = 0;
    }
    return r;
  }
}
