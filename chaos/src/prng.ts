/**
 * A small seeded pseudo-random number generator (mulberry32): the same seed
 * gives the same sequence on every machine, so a chaos run that failed can
 * be replayed with its `--seed`. Not for anything secret.
 *
 * Guarantees: `next()` is in [0, 1); `fork(label)` gives an independent
 * stream derived from the seed and the label only, so adding draws to one
 * part of the run (the workload) does not change another's (the nemesis).
 */

/** A seeded random source; see the module comment. */
export class Prng {
  private state: number;

  /** @param seed any 32-bit integer (other numbers are truncated to one). */
  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }

  /** The next number in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max] (both included). */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** A number in [min, max). */
  between(min: number, max: number): number {
    return min + this.next() * (max - min);
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  /**
   * One element of `items`, uniformly.
   * @throws RangeError when `items` is empty.
   */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError("Prng.pick: no items to pick from");
    return items[this.int(0, items.length - 1)];
  }

  /** An independent stream for the part of the run called `label`. */
  fork(label: string): Prng {
    let h = this.seed >>> 0;
    for (let i = 0; i < label.length; i++) h = Math.imul(h ^ label.charCodeAt(i), 2654435761);
    return new Prng(h ^ (h >>> 16));
  }
}

/** A random seed for a run that was given none (printed, so that the run can be replayed). */
export function randomSeed(): number {
  return Math.floor(Math.random() * 0x7fffffff);
}
