/**
 * Supervisor reports, as OTP's SASL supervisor, progress and crash reports:
 * the tree tells its ReportHub what happens (a runnable started, became
 * healthy, was done, died; a restart was scheduled; a runnable was given up
 * on and its failure escalated), and the hub keeps the last reports in a
 * bounded history and hands them to subscribers.
 *
 * Costs: with no subscriber and a history of 0, a report is not even made.
 * Otherwise one small record per report, written into a fixed ring; a
 * subscriber's queue is bounded too (drop oldest, counted in `dropped`).
 */
import {
  maxReportErrorMessageChars,
  maxReportErrorNameChars,
  maxReportErrorStackChars,
  type ReportError,
  type ReportsOptions,
  type SupervisorReport,
} from "./report-types";
import type { TreeNode } from "./tree-node";
import type { NodeState } from "./types";

/** Default of `SupervisorOptions.reportHistory`. */
export const defaultReportHistory = 1000;
/** Default of `ReportsOptions.bufferSize`. */
export const defaultReportBufferSize = 1000;

/** A report before the hub numbers it. */
export type ReportBody = SupervisorReport extends infer R
  ? R extends SupervisorReport
    ? Omit<R, "seq">
    : never
  : never;

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

/** A fixed-capacity ring, oldest overwritten first. */
class Ring<T> {
  private readonly items: T[] = [];
  private head = 0;

  constructor(readonly capacity: number) {}

  get length(): number {
    return this.items.length;
  }

  /** Adds `item`; returns true when it pushed the oldest out. */
  push(item: T): boolean {
    if (this.items.length < this.capacity) {
      this.items.push(item);
      return false;
    }
    this.items[this.head] = item;
    this.head = (this.head + 1) % this.capacity;
    return true;
  }

  toArray(): T[] {
    return this.head === 0
      ? this.items.slice()
      : this.items.slice(this.head).concat(this.items.slice(0, this.head));
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
  private readonly history: Ring<SupervisorReport> | undefined;
  private readonly subscribers = new Set<Subscriber>();
  private readonly changeListeners = new Set<() => void>();
  private ended = false;

  constructor(historySize: number = defaultReportHistory) {
    if (!Number.isInteger(historySize) || historySize < 0) {
      throw new RangeError(`reportHistory must be an integer >= 0, got ${historySize}`);
    }
    if (historySize > 0) this.history = new Ring(historySize);
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
  emit(body: ReportBody): void {
    const r = body as SupervisorReport;
    r.seq = ++this.seq;
    this.history?.push(r);
    for (const s of this.subscribers) s.report(r);
  }

  /**
   * `node` entered state `to` (at `node.since`): a started, healthy, done or
   * died report (a cancellation makes none), and a change for the watchers.
   */
  transition(node: TreeNode, to: NodeState, error: Error | undefined): void {
    if (this.history !== undefined || this.subscribers.size > 0) {
      const base = { dn: node.dn, time: node.since };
      switch (to) {
        case "new":
          this.emit({ kind: "started", ...base, restarts: node.restarts });
          break;
        case "healthy":
          this.emit({ kind: "healthy", ...base });
          break;
        case "done":
          this.emit({ kind: "done", ...base });
          break;
        case "dead":
          this.emit({ kind: "died", ...base, error: reportError(error ?? new Error("died")) });
          break;
        default:
          break;
      }
    }
    if (this.changeListeners.size > 0) this.changed();
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
    const prefix = opts.dnPrefix ?? "";
    let out = this.history?.toArray() ?? [];
    if (prefix !== "") out = out.filter((r) => dnCovers(prefix, r.dn));
    if (opts.tail !== undefined && opts.tail >= 0)
      out = out.slice(Math.max(0, out.length - opts.tail));
    return out.map((r) => ({ ...r }));
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
