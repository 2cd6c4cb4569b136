/**
 * An XState v5 machine as a supervised child: the RunContext reaches the
 * machine as `input.ctx`; the state tagged `healthy` makes the child healthy,
 * the final state makes it done, an error in an invoked actor fails it (and
 * the restart creates a fresh actor).
 */
import { supervise } from "@metropolis/supervisor";
import { machineRunnable, type SupervisedInput } from "@metropolis/supervisor/xstate";
import { fromPromise, setup } from "xstate";

const connection = setup({
  types: { input: {} as SupervisedInput & { url: string }, context: {} as { url: string } },
  actors: {
    connect: fromPromise<void, { url: string }>(async () => {
      await new Promise((resolve) => setTimeout(resolve, 100)); // stands in for a real connect
    }),
  },
}).createMachine({
  context: ({ input }) => ({ url: input.url }),
  initial: "connecting",
  states: {
    connecting: {
      invoke: {
        src: "connect",
        input: ({ context }) => ({ url: context.url }),
        onDone: "connected",
      },
    },
    connected: { tags: ["healthy"], after: { 500: "closed" } },
    closed: { type: "final" },
  },
});

const sup = supervise(async (ctx) => {
  ctx.run("connection", machineRunnable(connection, { input: { url: "tcp://127.0.0.1:1" } }), {
    restart: "transient", // reaching the final state ends it for good
  });
  ctx.healthy();
  await ctx.untilAborted();
});
setTimeout(() => void sup.stop(), 1000).unref();
