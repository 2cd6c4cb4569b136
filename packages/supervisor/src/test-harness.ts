/**
 * testHarness: runs a runnable under a real supervisor inside a jest test.
 *
 * A failure nobody expected must fail the test, not just print a log line:
 * every wait of the harness rejects as soon as a runnable dies unexpectedly,
 * and `cleanup()` (call it in afterEach) throws if one did, or if anything is
 * still running after the tree was stopped, naming the DNs.
 */
import winston from "winston";
import { SupervisorError } from "./errors";
import { defaultLogLevelEnv } from "./logger";
import { supervise } from "./supervise";
import type { NodeState, Runnable, Supervisor, SupervisorOptions, Transition } from "./types";

/** How {@link testHarness} runs its tree; the rest are the tree's own options. */
export interface TestHarnessOptions extends Omit<SupervisorOptions, "logger"> {
  /**
   * Deaths a test provokes on purpose: these DNs may die without failing it.
   * @default none: every death fails the test
   */
  expectDeath?: (dn: string) => boolean;
  /**
   * Default deadline of every wait, in milliseconds.
   * @default 10000
   */
  timeoutMs?: number;
  /**
   * The environment variable that sets the harness logger's level.
   * @default "METROPOLIS_LOG_LEVEL" (and `debug` when it is unset)
   */
  logLevelEnv?: string;
  /**
   * The environment variable that, when set to anything non-empty, prints
   * the tree's log lines; they are silent otherwise.
   * @default "METROPOLIS_TEST_LOGS"
   */
  testLogsEnv?: string;
}

/** A runnable died and the test did not say it might. */
export class UnexpectedDeathError extends SupervisorError {
  constructor(
    /** The unexpected deaths, in order. */
    readonly transitions: Transition[],
  ) {
    super(
      `unexpected failure: ${transitions.map((t) => `${t.dn}: ${t.error?.message ?? "died"}`).join("; ")}`,
    );
  }
}

/** A wait of the harness did not see its condition before the deadline. */
export class HarnessTimeoutError extends SupervisorError {}

/** A runnable under a real tree, with waits that fail on unexpected deaths. */
export interface TestHarness {
  /** The tree the runnable runs in. */
  readonly supervisor: Supervisor;
  /** Every transition so far, in order. */
  readonly transitions: readonly Transition[];
  /** Resolves once `dn` is in `state` (at once if it already is). */
  waitFor(dn: string, state: NodeState, opts?: { timeoutMs?: number }): Promise<void>;
  /** Resolves with the first transition from now on that matches. */
  nextTransition(
    match: (t: Transition) => boolean,
    opts?: { timeoutMs?: number },
  ): Promise<Transition>;
  /** Stops the tree; throws on unexpected deaths or runnables that did not stop. */
  cleanup(opts?: { timeoutMs?: number }): Promise<void>;
}

/** Runs `runnable` as the root of a fresh supervision tree with a quiet logger. */
export function testHarness(runnable: Runnable, opts: TestHarnessOptions = {}): TestHarness {
  const {
    expectDeath = () => false,
    timeoutMs: defaultTimeout = 10_000,
    logLevelEnv = defaultLogLevelEnv,
    testLogsEnv = "METROPOLIS_TEST_LOGS",
    ...supervisorOpts
  } = opts;
  const transitions: Transition[] = [];
  const unexpected: Transition[] = [];
  const waiters = new Set<{
    match: (t: Transition) => boolean;
    resolve: (t: Transition) => void;
    reject: (e: Error) => void;
  }>();
  const logger = winston.createLogger({
    level: process.env[logLevelEnv] ?? "debug",
    transports: [new winston.transports.Console({ silent: !process.env[testLogsEnv] })],
  });
  const supervisor = supervise(runnable, { backoff: { initialMs: 10 }, ...supervisorOpts, logger });
  supervisor.onTransition((t) => {
    transitions.push(t);
    if (t.to === "dead" && !expectDeath(t.dn)) {
      unexpected.push(t);
      for (const w of waiters) w.reject(new UnexpectedDeathError([t]));
      waiters.clear();
      return;
    }
    for (const w of waiters) {
      if (w.match(t)) {
        waiters.delete(w);
        w.resolve(t);
      }
    }
  });

  const nextTransition = (match: (t: Transition) => boolean, o: { timeoutMs?: number } = {}) => {
    if (unexpected.length > 0) return Promise.reject(new UnexpectedDeathError(unexpected));
    const ms = o.timeoutMs ?? defaultTimeout;
    return new Promise<Transition>((resolve, reject) => {
      const timer = setTimeout(() => {
        waiters.delete(waiter);
        reject(new HarnessTimeoutError(`no matching transition within ${ms} ms`));
      }, ms);
      const waiter = {
        match,
        resolve: (t: Transition) => (clearTimeout(timer), resolve(t)),
        reject: (e: Error) => (clearTimeout(timer), reject(e)),
      };
      waiters.add(waiter);
    });
  };

  return {
    supervisor,
    transitions,
    nextTransition,
    async waitFor(dn, state, o = {}) {
      if (unexpected.length > 0) throw new UnexpectedDeathError(unexpected);
      if (supervisor.tree().some((n) => n.dn === dn && n.state === state)) return;
      await nextTransition((t) => t.dn === dn && t.to === state, {
        timeoutMs: o.timeoutMs ?? defaultTimeout,
      }).catch((e: unknown) => {
        if (e instanceof HarnessTimeoutError) {
          const now = supervisor.tree().find((n) => n.dn === dn);
          throw new HarnessTimeoutError(
            `${dn} did not reach ${state} within ${o.timeoutMs ?? defaultTimeout} ms (it is ${now?.state ?? "not in the tree"})`,
          );
        }
        throw e;
      });
    },
    async cleanup(o = {}) {
      const report = await supervisor.stop({ timeoutMs: o.timeoutMs ?? defaultTimeout });
      for (const w of waiters) w.reject(new SupervisorError("harness cleaned up"));
      waiters.clear();
      const problems: string[] = [];
      if (unexpected.length > 0) problems.push(new UnexpectedDeathError(unexpected).message);
      if (!report.clean) problems.push(`still running after stop: ${report.laggards.join(", ")}`);
      if (problems.length > 0) throw new SupervisorError(problems.join("\n"));
    },
  };
}
