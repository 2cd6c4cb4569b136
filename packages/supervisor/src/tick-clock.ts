/**
 * The wall clock as the tree stamps its transitions: read once per burst of
 * synchronous work, not once per transition.
 *
 * A group restart of a hundred siblings makes three transitions per sibling
 * (canceled, new, healthy), all in one synchronous run of the event loop, and
 * `Date.now()` costs about 0.1 µs here: it was the largest single cost of a
 * runnable's lifecycle (start, healthy, done: 15 % of its CPU in a profile).
 * Nothing outside the burst can happen between those transitions (no I/O, no
 * timer), so they are stamped with the same time.
 *
 * The cached reading expires on the first microtask queued after it was
 * taken: it is never older than the synchronous work that took it plus the
 * microtasks already queued then. Only the stamps of transitions and reports
 * come from here; what decides behaviour (restart delays, restart intensity)
 * reads `Date.now()` itself.
 */
export class TickClock {
  private reading: number | undefined;
  private readonly expire = (): void => {
    this.reading = undefined;
  };

  /** Milliseconds since the epoch, as `Date.now()` returned at the start of this burst. */
  now(): number {
    if (this.reading === undefined) {
      this.reading = Date.now();
      queueMicrotask(this.expire);
    }
    return this.reading;
  }
}
