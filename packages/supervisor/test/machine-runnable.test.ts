import { eventually, testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { startOnMock } from "@metropolis/supervisor/testing";
import {
  machineRunnable,
  stateValueText,
  type SupervisedInput,
} from "@metropolis/supervisor/xstate";
import { fromCallback, fromPromise, setup } from "xstate";
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

type LeaseEvent =
  { type: "elected" } | { type: "confirmed" } | { type: "lost" } | { type: "crash" };

/** Where the test reaches a running leadership machine: its invoked callback fills in `send`. */
interface Remote {
  send?: (event: LeaseEvent) => void;
}

/** The shape of the curator's leadership: nested states an operator wants to tell apart. */
const leadership = setup({
  types: {
    input: {} as SupervisedInput & { remote: Remote },
    context: {} as { remote: Remote },
    events: {} as LeaseEvent,
  },
  actors: {
    remote: fromCallback<LeaseEvent, Remote>(({ input, sendBack }) => {
      input.send = sendBack;
      return () => {
        input.send = undefined;
      };
    }),
    fail: fromPromise<void>(async () => {
      throw new Error("lease store unreachable");
    }),
  },
}).createMachine({
  id: "leadership",
  context: ({ input }) => ({ remote: input.remote }),
  invoke: { src: "remote", input: ({ context }) => context.remote },
  initial: "following",
  states: {
    following: { tags: ["healthy"], on: { elected: "leading" } },
    leading: {
      tags: ["healthy"],
      initial: "leaseUnconfirmed",
      states: {
        leaseUnconfirmed: { on: { confirmed: "leaseConfirmed" } },
        leaseConfirmed: {},
        failing: { invoke: { src: "fail" } },
      },
      on: { lost: "following", crash: ".failing" },
    },
  },
});

describe("machineRunnable's status", () => {
  const send = (remote: Remote, event: LeaseEvent) => {
    if (!remote.send) throw new Error("the machine is not running");
    remote.send(event);
  };

  it("the tree shows the machine's state as it changes, cleared when the run ends and fresh after the restart", async () => {
    const remote: Remote = {};
    const harness = testHarness(
      async (ctx) => {
        ctx.run("curator", machineRunnable(leadership, { input: { remote } }));
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.curator" },
    );
    h = harness;
    const status = () => harness.supervisor.tree().find((n) => n.dn === "root.curator")?.status;
    const seen: string[] = [];
    harness.supervisor.onTransition((t) => {
      if (t.dn === "root.curator") seen.push(`${t.to}: ${status() ?? "-"}`);
    });
    await harness.waitFor("root.curator", "healthy");
    expect(status()).toBe("following");
    send(remote, { type: "elected" });
    await eventually(() => status() === "leading.leaseUnconfirmed", "leading.leaseUnconfirmed");
    send(remote, { type: "confirmed" });
    await eventually(() => status() === "leading.leaseConfirmed", "leading.leaseConfirmed");
    send(remote, { type: "lost" });
    await eventually(() => status() === "following", "following again");
    send(remote, { type: "elected" });
    send(remote, { type: "crash" });
    await harness.nextTransition((t) => t.dn === "root.curator" && t.to === "healthy");
    // The fresh actor's first state, not what the failed one was in.
    expect(status()).toBe("following");
    expect(seen).toEqual([
      "new: -",
      "healthy: following",
      "dead: -",
      "new: -",
      "healthy: following",
    ]);
  });

  it("publishes every change of state once, as a MockContext records", async () => {
    const remote: Remote = {};
    const run = startOnMock("root.curator", machineRunnable(leadership, { input: { remote } }));
    send(remote, { type: "elected" });
    send(remote, { type: "confirmed" });
    send(remote, { type: "lost" });
    expect(run.ctx.statuses).toEqual([
      "following",
      "leading.leaseUnconfirmed",
      "leading.leaseConfirmed",
      "following",
    ]);
    expect(run.ctx.currentStatus).toBe("following");
    await run.stop();
  });
});

describe("stateValueText", () => {
  it("gives a state value as the dotted paths of its active states", () => {
    expect(stateValueText("following")).toBe("following");
    expect(stateValueText({ leading: "leaseUnconfirmed" })).toBe("leading.leaseUnconfirmed");
    expect(stateValueText({ up: { lease: "held", watch: { syncing: "catchUp" } } })).toBe(
      "up.lease.held, up.watch.syncing.catchUp",
    );
    // A parallel state whose regions are atomic: their values are empty objects.
    expect(stateValueText({ up: { lease: {}, watch: {} } })).toBe("up.lease, up.watch");
  });
});
