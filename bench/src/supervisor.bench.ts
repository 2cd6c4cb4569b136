/**
 * Supervisor benchmark: `npm run bench:supervisor`.
 *
 * Measures, in one run on one machine, so that the ratios mean something on a
 * shared and noisy host:
 *  (a) lifecycle throughput (spawn → healthy → done → settled) of N supervised
 *      runnables, against bare async functions, XState v5 actors
 *      (createActor, start, send, done) and Effect fibers (forkChild + join);
 *  (b) restart latency when one of 100 group siblings dies and all of them
 *      restart with zero backoff (p50/p99 from the death to all healthy);
 *  (c) retained heap per idle healthy runnable, with 10,000 of them.
 * Prints a table and writes reports/bench-supervisor.json.
 */
import { performance } from "node:perf_hooks";
import { supervise, type RunContext, type Supervisor } from "@metropolis/supervisor";
import winston from "winston";
import { createActor, createMachine, toPromise } from "xstate";
import { median, percentile, writeReport, printTable, type Row } from "./report";

const N = 50_000;
const ROUNDS = 5;
const SIBLINGS = 100;
const RESTART_ROUNDS = 7;
const RESTARTS_PER_ROUND = 300;
const IDLE = 10_000;

// Supervisor logs go nowhere: the benchmark measures supervision, not console I/O.
const quiet = () =>
  winston.createLogger({ transports: [new winston.transports.Console({ silent: true })] });

const gc = (): void => {
  if (!global.gc) throw new Error("run with node --expose-gc (npm run bench:supervisor does)");
  global.gc();
};

/** Runs `fn` ROUNDS times after a warm-up round; returns the median ops/s. */
async function throughput(fn: () => Promise<void>): Promise<number> {
  await fn();
  const rates: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    gc();
    const start = performance.now();
    await fn();
    rates.push(N / ((performance.now() - start) / 1000));
  }
  return median(rates);
}

async function supervisedLifecycles(): Promise<void> {
  const job = async (ctx: RunContext) => {
    ctx.healthy();
    ctx.done();
  };
  const sup = supervise(
    async (ctx) => {
      for (let i = 0; i < N; i++) ctx.run(`r${i}`, job);
      ctx.healthy();
      ctx.done();
    },
    { logger: quiet() },
  );
  await sup.done;
}

async function bareLifecycles(): Promise<void> {
  const job = async () => undefined;
  const all: Promise<void>[] = [];
  for (let i = 0; i < N; i++) all.push(job());
  await Promise.all(all);
}

const xstateMachine = createMachine({
  initial: "running",
  states: { running: { on: { finish: "finished" } }, finished: { type: "final" } },
});

async function xstateLifecycles(): Promise<void> {
  const all: Promise<unknown>[] = [];
  for (let i = 0; i < N; i++) {
    const actor = createActor(xstateMachine);
    actor.start();
    all.push(toPromise(actor));
    actor.send({ type: "finish" });
  }
  await Promise.all(all);
}

async function effectLifecycles(): Promise<void> {
  // Effect ships as ES modules only; this benchmark is CommonJS like the rest.
  const { Effect, Fiber } = await import("effect");
  await Effect.runPromise(
    Effect.gen(function* () {
      const fibers = [];
      for (let i = 0; i < N; i++) fibers.push(yield* Effect.forkChild(Effect.void));
      for (const f of fibers) yield* Fiber.join(f);
    }),
  );
}

/**
 * (b): from a sibling's death to all 100 siblings healthy again, in rounds of
 * RESTARTS_PER_ROUND. Returns each round's latencies: a burst of noise from a
 * neighbour on this shared machine spoils one round, not the result.
 */
async function restartLatencies(): Promise<number[][]> {
  let kill: (() => void) | undefined;
  let healthyCount = 0;
  let allHealthy: (() => void) | undefined;
  const sibling = async (ctx: RunContext) => {
    ctx.healthy();
    if (++healthyCount === SIBLINGS) allHealthy?.();
    await ctx.untilAborted();
  };
  const victim = async (ctx: RunContext) => {
    ctx.healthy();
    if (++healthyCount === SIBLINGS) allHealthy?.();
    await new Promise<void>((resolve) => {
      kill = resolve;
      void ctx.untilAborted().then(resolve);
    });
    if (!ctx.signal.aborted) throw new Error("killed by the benchmark");
  };
  const group: Record<string, typeof sibling> = { victim };
  for (let i = 1; i < SIBLINGS; i++) group[`s${i}`] = sibling;
  const waitAllHealthy = () => new Promise<void>((r) => (allHealthy = r));
  let ready = waitAllHealthy();
  const sup: Supervisor = supervise(
    async (ctx) => {
      ctx.runGroup(group);
      ctx.healthy();
      await ctx.untilAborted();
    },
    { logger: quiet(), backoff: { initialMs: 0 } },
  );
  await ready;
  const rounds: number[][] = [];
  for (let round = -1; round < RESTART_ROUNDS; round++) {
    const latencies: number[] = [];
    for (let i = 0; i < RESTARTS_PER_ROUND; i++) {
      healthyCount = 0;
      ready = waitAllHealthy();
      const start = performance.now();
      kill!();
      await ready;
      latencies.push(performance.now() - start);
    }
    if (round >= 0) rounds.push(latencies); // round -1 warms up
  }
  await sup.stop();
  return rounds;
}

/** (c): heap retained per idle healthy runnable. */
async function retainedHeapPerRunnable(): Promise<number> {
  const idle = async (ctx: RunContext) => {
    ctx.healthy();
    await ctx.untilAborted();
  };
  gc();
  const before = process.memoryUsage().heapUsed;
  let healthy: () => void = () => undefined;
  const allHealthy = new Promise<void>((r) => (healthy = r));
  const sup = supervise(
    async (ctx) => {
      for (let i = 0; i < IDLE; i++) ctx.run(`idle${i}`, idle);
      ctx.healthy();
      healthy();
      await ctx.untilAborted();
    },
    { logger: quiet() },
  );
  await allHealthy;
  await new Promise((r) => setImmediate(r));
  gc();
  const after = process.memoryUsage().heapUsed;
  await sup.stop();
  return (after - before) / IDLE;
}

async function main(): Promise<void> {
  const ours = await throughput(supervisedLifecycles);
  const bare = await throughput(bareLifecycles);
  const xstate = await throughput(xstateLifecycles);
  const effect = await throughput(effectLifecycles);
  const rounds = await restartLatencies();
  const perRunnable = await retainedHeapPerRunnable();
  const p50 = median(rounds.map((r) => percentile(r, 50)));
  const p99s = rounds.map((r) => percentile(r, 99));
  const p99 = median(p99s);

  const rows: Row[] = [
    { measure: `(a) lifecycles/s, supervised (N=${N})`, value: ours, unit: "ops/s" },
    { measure: "(a) lifecycles/s, bare async functions", value: bare, unit: "ops/s" },
    { measure: "(a) lifecycles/s, XState v5 createActor", value: xstate, unit: "ops/s" },
    { measure: "(a) lifecycles/s, Effect forkChild+join", value: effect, unit: "ops/s" },
    {
      measure: "(a) supervised / XState",
      value: ours / xstate,
      unit: "×",
      target: ">= 10",
      met: ours / xstate >= 10,
    },
    {
      measure: "(a) supervised / Effect",
      value: ours / effect,
      unit: "×",
      target: ">= 0.5",
      met: ours / effect >= 0.5,
    },
    { measure: "(a) supervised / bare", value: ours / bare, unit: "×" },
    {
      measure: `(b) group restart p50 (${SIBLINGS} siblings), median of rounds`,
      value: p50,
      unit: "ms",
    },
    {
      measure: `(b) group restart p99 (${SIBLINGS} siblings), median of ${RESTART_ROUNDS} rounds`,
      value: p99,
      unit: "ms",
      target: "< 1",
      met: p99 < 1,
    },
    { measure: "(b) group restart p99, worst round", value: Math.max(...p99s), unit: "ms" },
    {
      measure: `(c) retained heap per idle runnable (${IDLE})`,
      value: perRunnable,
      unit: "bytes",
      target: "<= 1536",
      met: perRunnable <= 1536,
    },
  ];
  printTable("supervisor", rows);
  await writeReport("bench-supervisor.json", rows);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
