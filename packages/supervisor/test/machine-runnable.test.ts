import { testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { machineRunnable, type SupervisedInput } from "@metropolis/supervisor/xstate";
import { fromPromise, setup } from "xstate";
import { serve } from "./helpers";

let h: TestHarness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

/**
 * A small machine in the style every subsystem uses: typed with setup(), its
 * actors reach the supervisor through `input.ctx`.
 */
const enrolment = setup({
  types: {
    input: {} as SupervisedInput & { fail?: () => boolean; finish: boolean },
    context: {} as SupervisedInput & { fail?: () => boolean; finish: boolean },
    events: {} as { type: "stop" },
  },
  actors: {
    startWorker: fromPromise<void, SupervisedInput>(async ({ input }) => {
      input.ctx.run("worker", serve);
    }),
    enrol: fromPromise<void, { fail?: () => boolean }>(async ({ input }) => {
      if (input.fail?.()) throw new Error("enrolment failed");
    }),
  },
}).createMachine({
  id: "enrolment",
  context: ({ input }) => input,
  initial: "starting",
  states: {
    starting: {
      invoke: {
        src: "startWorker",
        input: ({ context }) => ({ ctx: context.ctx }),
        onDone: "enrolling",
      },
    },
    enrolling: {
      invoke: {
        src: "enrol",
        input: ({ context }) => ({ fail: context.fail }),
        onDone: [
          { guard: ({ context }) => context.finish, target: "finished" },
          { target: "running" },
        ],
      },
    },
    running: { tags: ["healthy"] },
    finished: { type: "final" },
  },
});

describe("machineRunnable", () => {
  it("gives the machine its RunContext, and a state tagged healthy makes the runnable healthy", async () => {
    h = testHarness(async (ctx) => {
      ctx.run("enrolment", machineRunnable(enrolment, { input: { finish: false } }));
      await serve(ctx);
    });
    await h.waitFor("root.enrolment.worker", "healthy");
    await h.waitFor("root.enrolment", "healthy");
    const debug = h.supervisor.logs("root.enrolment").filter((l) => l.level === "debug");
    expect(debug.map((l) => l.message)).toEqual([
      'state "starting"',
      'state "enrolling"',
      'state "running"',
    ]);
  });

  it("a final state means done(): the runnable returns and is not restarted", async () => {
    h = testHarness(async (ctx) => {
      ctx.run("enrolment", machineRunnable(enrolment, { input: { finish: true } }));
      await serve(ctx);
    });
    await h.waitFor("root.enrolment", "done");
    expect(h.transitions.filter((t) => t.dn === "root.enrolment").map((t) => t.to)).toEqual([
      "new",
      "healthy",
      "done",
    ]);
  });

  it("an error fails the runnable, and the restart runs a fresh actor", async () => {
    let enrolments = 0;
    h = testHarness(
      async (ctx) => {
        ctx.run(
          "enrolment",
          machineRunnable(enrolment, { input: { fail: () => ++enrolments === 1, finish: false } }),
        );
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.enrolment" },
    );
    const death = await h.nextTransition((t) => t.dn === "root.enrolment" && t.to === "dead");
    expect(death.error?.message).toBe("enrolment failed");
    await h.nextTransition((t) => t.dn === "root.enrolment" && t.to === "healthy");
    // The fresh actor started from its initial state again: it re-created its worker.
    expect(
      h.transitions.filter((t) => t.dn === "root.enrolment.worker" && t.to === "new"),
    ).toHaveLength(2);
    expect(enrolments).toBe(2);
  });

  it("a custom predicate decides health", async () => {
    h = testHarness(async (ctx) => {
      ctx.run(
        "enrolment",
        machineRunnable(enrolment, {
          input: { finish: false },
          healthy: (s) => s.matches("enrolling"),
        }),
      );
      await serve(ctx);
    });
    await h.waitFor("root.enrolment", "healthy");
    const debug = h.supervisor.logs("root.enrolment").map((l) => l.message);
    expect(debug.indexOf('state "enrolling"')).toBeGreaterThanOrEqual(0);
  });

  it("abort stops the actor and the runnable ends as cancelled", async () => {
    h = testHarness(async (ctx) => {
      ctx.run("enrolment", machineRunnable(enrolment, { input: { finish: false } }));
      await serve(ctx);
    });
    await h.waitFor("root.enrolment", "healthy");
    await h.supervisor.stop();
    expect(h.supervisor.tree().find((n) => n.dn === "root.enrolment")?.state).toBe("canceled");
  });
});
