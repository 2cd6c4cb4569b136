/**
 * `@metropolis/supervisor`: an Erlang-style supervision tree for Node.js
 * services.
 *
 * @example
 * ```ts
 * import { supervise, type RunContext } from "@metropolis/supervisor";
 *
 * async function worker(ctx: RunContext) {
 *   ctx.logger.info("started");
 *   ctx.healthy();
 *   while (!ctx.signal.aborted) {
 *     await ctx.sleep(1000).catch(() => undefined); // rejects when aborted
 *   }
 * }
 *
 * const sup = supervise(async (ctx) => {
 *   ctx.run("worker", worker); // restarted with backoff whenever it fails
 *   ctx.healthy();
 *   await ctx.untilAborted();
 * });
 * process.once("SIGTERM", () => void sup.stop({ timeoutMs: 5000 }));
 * ```
 *
 * Every service is a *runnable*: an async function of a {@link RunContext}.
 * It starts its children, declares itself healthy, and runs until its work is
 * done or its signal aborts. A runnable that fails in any other way is logged
 * at its DN, its subtree and its group siblings are stopped, and once all of
 * them have settled it is started again after an exponential backoff, while
 * the siblings restart at once:
 *
 *   root ─┬─ network
 *         ├─ cluster ── (enrolment)
 *         └─ role ─┬─ controlplane ─┬─ consensus     (group: one-for-all)
 *                  │                └─ curator
 *                  └─ heartbeat
 *
 * Guarantees: a runnable is never running twice at once; it is restarted only
 * after its whole subtree has settled; restarts are decided the moment the
 * last runnable of a subtree settles (no polling); stop() leaves no timer
 * behind. Beyond Monogon's design it has OTP's restart types (permanent,
 * transient, temporary) and restart intensity with escalation to the parent.
 *
 * This entry loads only the tree and winston (its default logger). The
 * helpers live in subpaths, each loading its own dependency only when
 * imported: `/process` (child processes), `/grpc` (grpc-js servers),
 * `/xstate` (XState v5 machines), `/prometheus` (prom-client metrics) and
 * `/testing` (test harness, MockContext, eventually).
 *
 * @module
 */
export type * from "./types";
export * from "./report-types";
export { supervise } from "./supervise";
export { Backoff, defaultBackoff, resolveBackoff } from "./backoff";
export { abortableSleep } from "./abortable-sleep";
export { abortable } from "./abortable";
export { answerDeadline, type AnswerDeadline } from "./answer-deadline";
export { withoutStackTrace } from "./without-stack-trace";
export { isRunnableName, runnableNamePattern } from "./names";
export { maxStatusLength } from "./status-text";
export * from "./errors";
