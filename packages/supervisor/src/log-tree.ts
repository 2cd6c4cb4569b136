/**
 * The log tree: the last lines of every DN, kept in memory so that a node's
 * debug service can show what a runnable said without a log collector. Each
 * DN has its own bounded ring buffer, so a chatty runnable cannot push the
 * lines of a quiet one out.
 */
import type { LogEntry } from "./types";

interface SequencedEntry {
  seq: number;
  entry: LogEntry;
}

/** A fixed-capacity ring of entries, oldest overwritten first. */
class Ring {
  private readonly items: SequencedEntry[] = [];
  private head = 0;

  constructor(private readonly capacity: number) {}

  push(item: SequencedEntry): void {
    if (this.items.length < this.capacity) this.items.push(item);
    else {
      this.items[this.head] = item;
      this.head = (this.head + 1) % this.capacity;
    }
  }

  /** Entries oldest first. */
  toArray(): SequencedEntry[] {
    return this.items.slice(this.head).concat(this.items.slice(0, this.head));
  }
}

/** Per-DN ring buffers of log lines, queried by DN prefix, with subscribers to new lines. */
export class LogTree {
  private readonly rings = new Map<string, Ring>();
  private readonly listeners = new Set<(entry: LogEntry) => void>();
  private seq = 0;

  constructor(readonly linesPerDn: number = 1000) {
    if (!Number.isInteger(linesPerDn) || linesPerDn < 1) {
      throw new RangeError(`logBufferLines must be a positive integer, got ${linesPerDn}`);
    }
  }

  append(entry: LogEntry): void {
    let ring = this.rings.get(entry.dn);
    if (!ring) {
      ring = new Ring(this.linesPerDn);
      this.rings.set(entry.dn, ring);
    }
    ring.push({ seq: this.seq++, entry });
    for (const cb of this.listeners) cb(entry);
  }

  /** Calls `cb` with every entry appended from now on; returns the unsubscribe function. */
  subscribe(cb: (entry: LogEntry) => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  /** Lines of `dnPrefix` and every DN below it, oldest first; `tail` keeps the newest N. */
  query(dnPrefix: string, opts: { tail?: number } = {}): LogEntry[] {
    const below = dnPrefix + ".";
    let found: SequencedEntry[] = [];
    for (const [dn, ring] of this.rings) {
      if (dn === dnPrefix || dn.startsWith(below)) found = found.concat(ring.toArray());
    }
    found.sort((a, b) => a.seq - b.seq);
    const entries = found.map((s) => s.entry);
    return opts.tail !== undefined && opts.tail >= 0
      ? entries.slice(entries.length - opts.tail)
      : entries;
  }
}
