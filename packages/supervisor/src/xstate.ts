/**
 * `@metropolis/supervisor/xstate`: an XState v5 machine as a supervised
 * runnable. Needs the optional peer dependency `xstate` (v5).
 *
 * @example
 * ```ts
 * import { setup } from "xstate";
 * import { supervise } from "@metropolis/supervisor";
 * import { machineRunnable, type SupervisedInput } from "@metropolis/supervisor/xstate";
 *
 * const machine = setup({ types: { input: {} as SupervisedInput } }).createMachine({
 *   initial: "serving",
 *   states: { serving: { tags: ["healthy"] } },
 * });
 * supervise(async (ctx) => {
 *   ctx.run("machine", machineRunnable(machine));
 *   ctx.healthy();
 *   await ctx.untilAborted();
 * });
 * ```
 *
 * @module
 */
export {
  machineRunnable,
  type MachineRunnableOptions,
  type SupervisedInput,
} from "./machine-runnable";
export { stateValueText } from "./state-value-text";
