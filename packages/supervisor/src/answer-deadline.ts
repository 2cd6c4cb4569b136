/**
 * Deadlines for a peer's answers that are not fooled by this process
 * running late.
 *
 * When a process's event loop falls behind (a busy node, or a scale
 * simulator's host running thousands of nodes on a shared CPU), libuv runs
 * every overdue timer of an iteration before it reads the sockets that have
 * become readable meanwhile:
 *
 *   loop iteration: timers ─▶ … ─▶ poll (socket reads, answers) ─▶ check (setImmediate)
 *
 * so a plain timer — grpc-js' own call deadline among them — gives up on an
 * answer that already sits in the socket, the call is dropped and made
 * again: more load on a process that was already late, and on its peer. The
 * scale simulator's starved hosts gave up thousands of heartbeat streams
 * that way, their answers received, and hundreds of questions "who leads?"
 * answered seconds before their deadline. A deadline from here fires in the
 * check phase of the iteration its timer fired in, after that iteration's
 * reads: an answer received by then wins. Used by the curator client's
 * leader search and roleserve's curator streams.
 */

/** A deadline signal and the means to call it off; see the module comment. */
export interface AnswerDeadline {
  /**
   * Aborted with the caller's reason when the caller's signal aborts, or
   * with the deadline's once it passed and the I/O received by then was
   * handled.
   */
  readonly signal: AbortSignal;
  /** Calls the deadline off (the answer came); the signal is then never aborted. */
  clear(): void;
}

/** The longest delay a Node timer takes; a longer one fires after 1 ms. */
const maxTimerMs = 2 ** 31 - 1;

/**
 * A deadline `ms` from now that aborts with `reason()`, or earlier with
 * `signal` (the caller's, if given); see the module comment. An infinite
 * `ms` never fires (a deadline beyond Node's longest timer, ~24.8 days,
 * fires then). It follows `signal` with
 * a listener removed by `clear()`, not with `AbortSignal.any`: that one is
 * made once per heartbeat on a signal that lives as long as the worker, and
 * Node keeps each such composite among the signal's dependants until a
 * garbage collection — a failover's aborts then walked them by thousands.
 */
export function answerDeadline(
  ms: number,
  reason: () => Error,
  signal?: AbortSignal,
): AnswerDeadline {
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal?.reason);
  let immediate: ReturnType<typeof setImmediate> | undefined;
  const timer =
    ms === Infinity
      ? undefined
      : setTimeout(
          () => {
            immediate = setImmediate(() => controller.abort(reason()));
          },
          Math.min(ms, maxTimerMs),
        );
  if (signal?.aborted) onAbort();
  else signal?.addEventListener("abort", onAbort, { once: true });
  return {
    signal: controller.signal,
    clear: () => {
      clearTimeout(timer);
      if (immediate !== undefined) clearImmediate(immediate);
      signal?.removeEventListener("abort", onAbort);
    },
  };
}
