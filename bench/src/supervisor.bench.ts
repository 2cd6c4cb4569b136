/**
 * Supervisor benchmark: `npm run bench:supervisor`.
 *
 * Measures, in one run on one machine, so that the ratios mean something on a
 * shared and noisy host, each figure for both ways a runnable waits for its
 * end: `await ctx.untilAborted()`, and a listener on `ctx.signal` (what
 * `events.once(signal, "abort")`, fetch and child_process do):
 *  (a) lifecycle throughput (start → healthy → done → settled) of N supervised
 *      runnables, against bare async functions, XState v5 actors
 *      (createActor, start, send, final) and Effect fibers (forkChild + join);
 *  (a') the lifecycle of a runnable that waits for its end on each path
 *      (start → healthy → wait → stopped → settled), against XState actors
 *      started and stopped, Effect fibers forked on `never` and interrupted,
 *      and a bare AbortController with one listener, aborted: the floor of a
 *      design that gives every run Node's own AbortSignal (ctx.signal is a
 *      lighter one, run-signal.ts). Reported without a target: the issue's
 *      throughput target is (a)'s lifecycle. (Until this form, each runnable also raced a
 *      finished promise against its end; `Promise.race` alone runs at about
 *      270k/s here, slower than a whole Effect fiber, so that form measured
 *      V8's combinators, not the supervisor.)
 *  (b) restart latency when one of 100 group siblings throws and all of them
 *      restart with zero backoff (p50/p99 from the throw to all healthy); on
 *      the signal path beside 100 bare AbortControllers aborted and re-armed:
 *      Node's own AbortSignal work (and the scavenges its allocations cause)
 *      took 9-14 ms there, which is why ctx.signal is not one of them;
 *  (c) retained heap per idle healthy runnable, with 10,000 of them, each
 *      measured in a fresh process (supervisor/retained-heap.ts says why);
 *  (d) how each of them grows from 100 to 100,000 runnables: a table, and a
 *      log-log plot in reports/bench-supervisor-growth.png.
 *
 * Every tree runs with the supervisor's default logger, as a real node does:
 * winston writing JSON lines to stdout, which is not a terminal. So stdout
 * must not be one: `npm run bench:supervisor` sends it to
 * reports/bench-supervisor.log, and the tables go to stderr.
 * Writes reports/bench-supervisor.json.
 */
import { fstatSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { supervise, type RunContext, type Supervisor } from "@metropolis/supervisor";
import { createActor, createMachine, toPromise } from "xstate";
import { logLogPlot, type Rgb } from "./png";
import { retainedHeapPerRunnable } from "./supervisor/retained-heap";
import { paths, untilEnd, type WaitPath } from "./supervisor/wait-paths";
import { median, percentile, writeReport, printTable, type Row } from "./report";

const N = 50_000;
const ROUNDS = 5;
const SIBLINGS = 100;
const RESTART_ROUNDS = 7;
const RESTARTS_PER_ROUND = 300;
const IDLE = 10_000;
const GROWTH = [100, 1_000, 10_000, 100_000];
const GROWTH_ROUNDS = 3;

const out = (line: string) => process.stderr.write(line + "\n");

const gc = (): void => {
  if (!global.gc) throw new Error("run with node --expose-gc (npm run bench:supervisor does)");
  global.gc();
};

/** Runs `fn` `rounds` times after a warm-up round; returns the median ops/s. */
async function throughput(n: number, rounds: number, fn: (n: number) => Promise<void>) {
  await fn(n);
  const rates: number[] = [];
  for (let i = 0; i < rounds; i++) {
    gc();
    const start = performance.now();
    await fn(n);
    rates.push(n / ((performance.now() - start) / 1000));
  }
  return median(rates);
}

/**
 * (a) the lifecycle the issue names: each runnable starts, is healthy, is
 * done, and its run settles. The peers do the same: an XState actor starts,
 * takes one event and reaches its final state; an Effect fiber is forked and
 * joined.
 */
async function supervisedDoneLifecycles(n: number): Promise<void> {
  const job = async (ctx: RunContext) => {
    ctx.healthy();
    ctx.done();
  };
  const sup = supervise(async (ctx) => {
    for (let i = 0; i < n; i++) ctx.run(`r${i}`, job);
    ctx.healthy();
    ctx.done();
  });
  await sup.done;
}

/**
 * (a') the lifecycle of a runnable that waits for its end, on one wait path:
 * it starts, is healthy, waits (`untilAborted()`, or a listener on
 * `ctx.signal`), is stopped with its tree, and its run settles. The peers
 * do the same: an XState actor is started and stopped; an Effect fiber is
 * forked on `Effect.never` and interrupted; and, for the signal path, a
 * native AbortController with one listener, aborted (no supervisor): the
 * floor of any design that gives every run Node's own AbortSignal.
 */
const supervisedStoppedLifecycles = (path: WaitPath) => async (n: number) => {
  let waiting = 0;
  let allWaiting: () => void = () => undefined;
  const ready = new Promise<void>((r) => (allWaiting = r));
  const job = async (ctx: RunContext) => {
    ctx.healthy();
    const end = untilEnd(ctx, path);
    if (++waiting === n) allWaiting();
    await end;
  };
  const sup = supervise(async (ctx) => {
    for (let i = 0; i < n; i++) ctx.run(`r${i}`, job);
    ctx.healthy();
    await ctx.untilAborted();
  });
  await ready;
  await sup.stop();
};

async function bareLifecycles(n: number): Promise<void> {
  const job = async () => undefined;
  const all: Promise<void>[] = [];
  for (let i = 0; i < n; i++) all.push(job());
  await Promise.all(all);
}

const xstateMachine = createMachine({
  initial: "running",
  states: { running: { on: { finish: "finished" } }, finished: { type: "final" } },
});
/** An actor that waits until it is stopped. */
const xstateWaiting = createMachine({ initial: "running", states: { running: {} } });

async function xstateLifecycles(n: number): Promise<void> {
  const all: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) {
    const actor = createActor(xstateMachine);
    actor.start();
    all.push(toPromise(actor));
    actor.send({ type: "finish" });
  }
  await Promise.all(all);
}

async function effectLifecycles(n: number): Promise<void> {
  // Effect ships as ES modules only; this benchmark is CommonJS like the rest.
  const { Effect, Fiber } = await import("effect");
  await Effect.runPromise(
    Effect.gen(function* () {
      const fibers = [];
      for (let i = 0; i < n; i++) fibers.push(yield* Effect.forkChild(Effect.void));
      for (const f of fibers) yield* Fiber.join(f);
    }),
  );
}

async function xstateStoppedLifecycles(n: number): Promise<void> {
  const actors = [];
  for (let i = 0; i < n; i++) {
    const actor = createActor(xstateWaiting);
    actor.start();
    actors.push(actor);
  }
  for (const actor of actors) actor.stop();
  await Promise.resolve();
}

async function effectStoppedLifecycles(n: number): Promise<void> {
  const { Effect, Fiber } = await import("effect");
  await Effect.runPromise(
    Effect.gen(function* () {
      const fibers = [];
      for (let i = 0; i < n; i++) fibers.push(yield* Effect.forkChild(Effect.never));
      // Let every fiber start waiting before it is interrupted.
      yield* Effect.sleep(0);
      for (const f of fibers) yield* Fiber.interrupt(f);
    }),
  );
}

/** `n` bare AbortControllers, each with one abort listener; `ends` settle as they fire. */
function armControllers(n: number): { controllers: AbortController[]; ends: Promise<void>[] } {
  const controllers: AbortController[] = [];
  const ends: Promise<void>[] = [];
  for (let i = 0; i < n; i++) {
    const controller = new AbortController();
    const signal = controller.signal;
    ends.push(
      new Promise<void>((resolve) =>
        signal.addEventListener("abort", () => resolve(), { once: true }),
      ),
    );
    controllers.push(controller);
  }
  return { controllers, ends };
}

async function abortControllerFloor(n: number): Promise<void> {
  const { controllers, ends } = armControllers(n);
  for (const c of controllers) c.abort();
  await Promise.all(ends);
}

/**
 * (b)'s floor on the signal path: what a group restart costs Node itself when
 * every member waits on its own AbortSignal and nothing supervises them. Each
 * restart aborts `size` armed controllers (one shared reason, as the tree
 * does), waits for every listener, and arms `size` fresh ones (the next runs'
 * signals). Same rounds and per-round count as `restartLatencies`.
 */
async function abortControllerRestartFloor(
  size: number,
  rounds: number,
  perRound: number,
): Promise<number[][]> {
  const reason = new Error("group restart");
  let armed = armControllers(size);
  const result: number[][] = [];
  for (let round = -1; round < rounds; round++) {
    const latencies: number[] = [];
    for (let i = 0; i < perRound; i++) {
      const start = performance.now();
      for (const c of armed.controllers) c.abort(reason);
      await Promise.all(armed.ends);
      armed = armControllers(size);
      latencies.push(performance.now() - start);
    }
    if (round >= 0) result.push(latencies);
  }
  return result;
}

/**
 * (b): from a sibling's throw to all `size` siblings of its group healthy
 * again, `perRound` times in each of `rounds` rounds (after a warm-up round).
 * Returns each round's latencies: a burst of noise from a neighbour on this
 * shared machine spoils one round, not the result.
 */
async function restartLatencies(
  path: WaitPath,
  size: number,
  rounds: number,
  perRound: number,
): Promise<number[][]> {
  let kill: (() => void) | undefined;
  let thrownAt = 0;
  let healthyCount = 0;
  let allHealthy: (() => void) | undefined;
  const sibling = async (ctx: RunContext) => {
    ctx.healthy();
    if (++healthyCount === size) allHealthy?.();
    await untilEnd(ctx, path);
  };
  const victim = async (ctx: RunContext) => {
    ctx.healthy();
    if (++healthyCount === size) allHealthy?.();
    // Told apart with a flag, not ctx.signal.aborted: on the untilAborted()
    // path the victim must not make the signal that path is measured without.
    let stopped = false;
    await new Promise<void>((resolve) => {
      kill = resolve;
      void untilEnd(ctx, path).then(() => {
        stopped = true;
        resolve();
      });
    });
    if (stopped) return;
    thrownAt = performance.now();
    throw new Error("killed by the benchmark");
  };
  const group: Record<string, typeof sibling> = { victim };
  for (let i = 1; i < size; i++) group[`s${i}`] = sibling;
  const waitAllHealthy = () => new Promise<void>((r) => (allHealthy = r));
  let ready = waitAllHealthy();
  const sup: Supervisor = supervise(
    async (ctx) => {
      ctx.runGroup(group);
      ctx.healthy();
      await ctx.untilAborted();
    },
    { backoff: { initialMs: 0 } },
  );
  await ready;
  const result: number[][] = [];
  for (let round = -1; round < rounds; round++) {
    const latencies: number[] = [];
    // The warm-up round (-1) is one restart when restarts are slow (big groups).
    const count = round < 0 && size > SIBLINGS ? 1 : perRound;
    for (let i = 0; i < count; i++) {
      healthyCount = 0;
      ready = waitAllHealthy();
      kill!();
      await ready;
      latencies.push(performance.now() - thrownAt);
    }
    if (round >= 0) result.push(latencies); // round -1 warms up
  }
  await sup.stop();
  return result;
}

/** The lifecycles measured: the done form (ours and peers) and the stopped form on each wait path (ours and peers). */
type Lifecycle = "done" | "xstate" | "effect" | WaitPath | "xstateStop" | "effectInterrupt";

interface Growth {
  runnables: number;
  lifecycles: Record<Lifecycle, number>;
  restartP99Ms: Record<WaitPath, number>;
  heapPerRunnable: Record<WaitPath, number>;
}

/**
 * Every lifecycle's rate for `n` runnables, ours and the peers': the median
 * of `rounds` rounds, each of which runs every form once, in turn. Rounds
 * interleave the forms (rather than all rounds of one form, then the next)
 * so that a change in the shared machine's load weighs on every form alike:
 * measured one form after the other, the ratio against a peer swung from 0.8
 * to 1.1 between runs.
 */
async function lifecycleRates(n: number, rounds: number): Promise<Record<Lifecycle, number>> {
  const forms: [Lifecycle, (n: number) => Promise<void>][] = [
    ["done", supervisedDoneLifecycles],
    ["xstate", xstateLifecycles],
    ["effect", effectLifecycles],
    ["untilAborted", supervisedStoppedLifecycles("untilAborted")],
    ["signal", supervisedStoppedLifecycles("signal")],
    ["xstateStop", xstateStoppedLifecycles],
    ["effectInterrupt", effectStoppedLifecycles],
  ];
  const rates: Record<Lifecycle, number[]> = {
    done: [],
    xstate: [],
    effect: [],
    untilAborted: [],
    signal: [],
    xstateStop: [],
    effectInterrupt: [],
  };
  for (const [, run] of forms) await run(n); // warm-up
  for (let round = 0; round < rounds; round++) {
    for (const [form, run] of forms) {
      gc();
      const start = performance.now();
      await run(n);
      rates[form].push(n / ((performance.now() - start) / 1000));
    }
  }
  return {
    done: median(rates.done),
    xstate: median(rates.xstate),
    effect: median(rates.effect),
    untilAborted: median(rates.untilAborted),
    signal: median(rates.signal),
    xstateStop: median(rates.xstateStop),
    effectInterrupt: median(rates.effectInterrupt),
  };
}

async function growth(): Promise<Growth[]> {
  const rows: Growth[] = [];
  for (const n of GROWTH) {
    const rounds = n >= 100_000 ? 1 : GROWTH_ROUNDS;
    // Restarts of big groups are slow: fewer of them (then p99 is the worst of few).
    const restartRounds = n >= 10_000 ? 1 : GROWTH_ROUNDS;
    const perRound = Math.max(3, Math.min(RESTARTS_PER_ROUND, Math.round(30_000 / n)));
    const row: Growth = {
      runnables: n,
      lifecycles: await lifecycleRates(n, rounds),
      restartP99Ms: { untilAborted: 0, signal: 0 },
      heapPerRunnable: { untilAborted: 0, signal: 0 },
    };
    for (const path of paths) {
      const r = await restartLatencies(path, n, restartRounds, perRound);
      row.restartP99Ms[path] = median(r.map((l) => percentile(l, 99)));
      // Below 1,000 runnables the heap's own noise after a GC (tens of KB)
      // is larger than what is measured: not reported (NaN, shown as "—").
      row.heapPerRunnable[path] = n < 1000 ? NaN : await retainedHeapPerRunnable(path, n);
    }
    rows.push(row);
  }
  return rows;
}

function printGrowth(rows: readonly Growth[]): void {
  const header = [
    "runnables",
    "lc/s done",
    "XState",
    "Effect",
    "stop uA",
    "stop sig",
    "XState stop",
    "Effect intr",
    "restart p99 ms uA",
    "restart p99 ms sig",
    "heap B uA",
    "heap B sig",
  ];
  const fmt = (v: number) =>
    Number.isNaN(v) ? "—" : v >= 1000 ? Math.round(v).toLocaleString("en-US") : v.toPrecision(3);
  const lines = rows.map((r) => [
    r.runnables.toLocaleString("en-US"),
    fmt(r.lifecycles.done),
    fmt(r.lifecycles.xstate),
    fmt(r.lifecycles.effect),
    fmt(r.lifecycles.untilAborted),
    fmt(r.lifecycles.signal),
    fmt(r.lifecycles.xstateStop),
    fmt(r.lifecycles.effectInterrupt),
    fmt(r.restartP99Ms.untilAborted),
    fmt(r.restartP99Ms.signal),
    fmt(r.heapPerRunnable.untilAborted),
    fmt(r.heapPerRunnable.signal),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const show = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i])).join("  ");
  out("\n(d) growth with the number of runnables (restart: a group of that many siblings)");
  out(show(header));
  out(widths.map((w) => "-".repeat(w)).join("  "));
  for (const l of lines) out(show(l));
}

const colors: Record<Lifecycle, Rgb> = {
  done: [148, 103, 189],
  untilAborted: [31, 119, 180],
  signal: [255, 127, 14],
  xstate: [44, 160, 44],
  effect: [214, 39, 40],
  xstateStop: [140, 86, 75],
  effectInterrupt: [127, 127, 127],
};

const pathLabels: Record<WaitPath, string> = {
  untilAborted: "untilAborted()",
  signal: "ctx.signal",
};

const labels: Record<Lifecycle, string> = {
  done: "done, supervised",
  untilAborted: "stopped, untilAborted()",
  signal: "stopped, ctx.signal",
  xstate: "done, XState",
  effect: "done, Effect",
  xstateStop: "stopped, XState",
  effectInterrupt: "stopped, Effect",
};

async function writePlot(rows: readonly Growth[]): Promise<string> {
  const series = <K extends Lifecycle>(
    keys: readonly K[],
    label: (k: K) => string,
    y: (r: Growth, k: K) => number,
  ) =>
    keys.map((k) => ({
      label: label(k),
      color: colors[k],
      points: rows.map((r) => [r.runnables, y(r, k)] as const),
    }));
  const png = logLogPlot([
    {
      title: "lifecycle, microseconds per runnable",
      series: series(
        [
          "done",
          "xstate",
          "effect",
          "untilAborted",
          "signal",
          "xstateStop",
          "effectInterrupt",
        ] as const,
        (k) => labels[k],
        (r, k) => 1e6 / r.lifecycles[k],
      ),
    },
    {
      title: "group restart p99, ms",
      series: series(
        paths,
        (k) => pathLabels[k],
        (r, k) => r.restartP99Ms[k],
      ),
    },
    {
      title: "retained heap, bytes per runnable",
      series: series(
        paths,
        (k) => pathLabels[k],
        (r, k) => r.heapPerRunnable[k],
      ),
    },
  ]);
  const path = join(__dirname, "..", "..", "reports", "bench-supervisor-growth.png");
  await writeFile(path, png);
  return path;
}

async function main(): Promise<void> {
  if (process.stdout.isTTY) {
    out(
      "stdout is a terminal: the supervisor's default logger would print human-readable lines,\n" +
        "not the JSON lines a real node writes. Run `npm run bench:supervisor`, which sends\n" +
        "stdout to reports/bench-supervisor.log (or redirect stdout to a file yourself).",
    );
    process.exit(2);
  }
  const rates = await lifecycleRates(N, ROUNDS);
  const bare = await throughput(N, ROUNDS, bareLifecycles);
  const floor = await throughput(N, ROUNDS, abortControllerFloor);
  const ratio = (measure: string, value: number, target: number): Row => ({
    measure,
    value,
    unit: "×",
    target: `>= ${target}`,
    met: value >= target,
  });

  const rows: Row[] = [
    { measure: `(a) lifecycles/s, bare async functions (N=${N})`, value: bare, unit: "ops/s" },
    {
      measure: "(a) done: lifecycles/s, XState v5 (start, send, final)",
      value: rates.xstate,
      unit: "ops/s",
    },
    {
      measure: "(a) done: lifecycles/s, Effect (forkChild + join)",
      value: rates.effect,
      unit: "ops/s",
    },
    { measure: "(a) done: lifecycles/s, supervised", value: rates.done, unit: "ops/s" },
    ratio("(a) done: supervised / XState", rates.done / rates.xstate, 10),
    ratio("(a) done: supervised / Effect", rates.done / rates.effect, 1),
    {
      measure: "(a') stopped: lifecycles/s, XState v5 (start, stop)",
      value: rates.xstateStop,
      unit: "ops/s",
    },
    {
      measure: "(a') stopped: lifecycles/s, Effect (forkChild never + interrupt)",
      value: rates.effectInterrupt,
      unit: "ops/s",
    },
    {
      measure: "(a') stopped: native AbortController + listener + abort (no supervisor)",
      value: floor,
      unit: "ops/s",
    },
  ];
  for (const path of paths) {
    const tag = path === "untilAborted" ? "untilAborted()" : "ctx.signal";
    const rate = rates[path];
    const rounds = await restartLatencies(path, SIBLINGS, RESTART_ROUNDS, RESTARTS_PER_ROUND);
    const p99s = rounds.map((r) => percentile(r, 99));
    const p99 = median(p99s);
    const heap = await retainedHeapPerRunnable(path, IDLE);
    const floorP99 =
      path === "signal"
        ? median(
            (await abortControllerRestartFloor(SIBLINGS, RESTART_ROUNDS, RESTARTS_PER_ROUND)).map(
              (r) => percentile(r, 99),
            ),
          )
        : undefined;
    const restartFloorRows = (supervisedP99: number) =>
      floorP99 === undefined
        ? []
        : [
            {
              measure: `(b) floor: ${SIBLINGS} native AbortControllers aborted and re-armed, p99 (no supervisor)`,
              value: floorP99,
              unit: "ms",
            },
            {
              measure: `(b) [${tag}] group restart p99 / that floor`,
              value: supervisedP99 / floorP99,
              unit: "×",
            },
          ];
    rows.push(
      { measure: `(a') [${tag}] stopped: lifecycles/s, supervised`, value: rate, unit: "ops/s" },
      // No target: the issue's throughput target is (a)'s lifecycle; this
      // one shows what waiting for the end costs on each path.
      {
        measure: `(a') [${tag}] stopped: supervised / XState`,
        value: rate / rates.xstateStop,
        unit: "×",
      },
      {
        measure: `(a') [${tag}] stopped: supervised / Effect`,
        value: rate / rates.effectInterrupt,
        unit: "×",
      },
      ...(path === "signal"
        ? [
            {
              measure: `(a') [${tag}] stopped: supervised / AbortController floor`,
              value: rate / floor,
              unit: "×",
            },
          ]
        : []),
      {
        measure: `(b) [${tag}] group restart p50 (${SIBLINGS}), median of rounds`,
        value: median(rounds.map((r) => percentile(r, 50))),
        unit: "ms",
      },
      {
        measure: `(b) [${tag}] group restart p99 (${SIBLINGS}), median of ${RESTART_ROUNDS}`,
        value: p99,
        unit: "ms",
        target: "< 1",
        met: p99 < 1,
      },
      {
        measure: `(b) [${tag}] group restart p99, worst round`,
        value: Math.max(...p99s),
        unit: "ms",
      },
      ...(path === "signal" ? restartFloorRows(p99) : []),
      {
        measure: `(c) [${tag}] retained heap per idle runnable (${IDLE})`,
        value: heap,
        unit: "bytes",
        target: "<= 1536",
        met: heap <= 1536,
      },
    );
  }
  printTable("supervisor", rows, out);
  const grown = await growth();
  printGrowth(grown);
  const plot = await writePlot(grown);
  out(`\nplot written to ${plot}`);
  // The logger really wrote: stdout (a file under npm run) holds its JSON lines.
  const logged = fstatSync(1).isFile() ? fstatSync(1).size : undefined;
  if (logged !== undefined)
    out(`the default logger wrote ${logged.toLocaleString("en-US")} bytes to stdout`);
  await writeReport("bench-supervisor.json", rows, out, {
    logger: "default (winston, JSON lines, stdout not a terminal)",
    loggedBytes: logged,
    growth: grown,
  });
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
