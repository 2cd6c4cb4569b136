/**
 * MockContext: a RunContext test double for unit-testing a single runnable
 * without a supervisor. It enforces the same rules as the real tree (names,
 * children only before healthy(), signal order) and records what the
 * runnable did (children, signals, log lines, status texts), so a test can
 * assert on it.
 */
import winston from "winston";
import Transport from "winston-transport";
import { abortableSleep } from "./abortable-sleep";
import { ChildStartError, DuplicateNameError, SignalMisuseError } from "./errors";
import { validateName } from "./names";
import { abortRunSignal, createRunSignal } from "./run-signal";
import { statusText } from "./status-text";
import type { ChildOptions, LogEntry, Logger, RunContext, Runnable } from "./types";

/** A child that the runnable under test started. */
export interface RecordedChild {
  /** The child's name under its parent. */
  name: string;
  /** What the child runs; {@link MockContext.runChild} runs it. */
  runnable: Runnable;
  /** The options it was started with. */
  opts: ChildOptions;
  /** Names of the whole group for `runGroup` children; undefined for `run`. */
  group?: string[];
}

class CaptureTransport extends Transport {
  constructor(private readonly sink: LogEntry[]) {
    super({ level: "debug" });
  }

  override log(info: winston.Logform.TransformableInfo, next: () => void): void {
    const { level, message, dn, ...meta } = info;
    this.sink.push({ dn: String(dn), level, message: String(message), time: Date.now(), meta });
    next();
  }
}

export class MockContext implements RunContext {
  readonly dn: string;
  readonly logger: Logger;
  /** Children started through run/runGroup, in order. */
  readonly children: RecordedChild[] = [];
  /** Every log line, of this context and its sub-loggers. */
  readonly lines: LogEntry[];
  /** Errors the real supervisor would have failed the runnable with (signal misuse). */
  readonly failures: Error[] = [];
  /** How often `healthy()` was called (more than once is a misuse, in `failures`). */
  healthyCalls = 0;
  /** How often `done()` was called. */
  doneCalls = 0;
  /** Where the runnable is in its lifecycle, as the real tree would see it. */
  state: "new" | "healthy" | "done" = "new";
  /**
   * Every `status()` call, in order, as the tree keeps the text (one line, cut
   * to `maxStatusLength`; "" for a call that cleared it).
   */
  readonly statuses: string[] = [];
  /**
   * The status the tree would show now, as `NodeStatus.status`: the last one
   * published, undefined when none is or it was cleared.
   */
  currentStatus: string | undefined;

  /** The same kind of signal the tree gives a run (run-signal.ts). */
  private readonly runSignal = createRunSignal();
  private readonly subLoggerNames = new Set<string>();
  private readonly rootLogger: winston.Logger;

  constructor(dn = "root", lines: LogEntry[] = []) {
    this.dn = dn;
    this.lines = lines;
    this.rootLogger = winston.createLogger({
      level: "debug",
      transports: [new CaptureTransport(lines)],
    });
    this.logger = this.rootLogger.child({ dn });
  }

  get signal(): AbortSignal {
    return this.runSignal;
  }

  /** Aborts the signal, as the supervisor does when the runnable must stop. */
  abort(reason: unknown = new Error(`${this.dn}: aborted by test`)): void {
    abortRunSignal(this.runSignal, reason);
  }

  run(name: string, runnable: Runnable, opts: ChildOptions = {}): void {
    this.record({ [name]: runnable }, opts, false);
  }

  runGroup(children: Record<string, Runnable>, opts: ChildOptions = {}): void {
    this.record(children, opts, true);
  }

  healthy(): void {
    if (this.state !== "new")
      return this.misuse(new SignalMisuseError(this.dn, "healthy", this.state));
    this.healthyCalls++;
    this.state = "healthy";
  }

  done(): void {
    if (this.state !== "healthy")
      return this.misuse(new SignalMisuseError(this.dn, "done", this.state));
    this.doneCalls++;
    this.state = "done";
  }

  status(text: string): void {
    const line = statusText(text);
    this.statuses.push(line);
    this.currentStatus = line === "" ? undefined : line;
  }

  subLogger(name: string): Logger {
    validateName(this.dn, name);
    if (this.child(name)) throw new DuplicateNameError(this.dn, name, "child");
    if (this.subLoggerNames.has(name)) throw new DuplicateNameError(this.dn, name, "sub-logger");
    this.subLoggerNames.add(name);
    return this.rootLogger.child({ dn: `${this.dn}.${name}` });
  }

  sleep(ms: number): Promise<void> {
    return abortableSleep(ms, this.signal);
  }

  untilAborted(): Promise<void> {
    if (this.signal.aborted) return Promise.resolve();
    return new Promise((resolve) =>
      this.signal.addEventListener("abort", () => resolve(), { once: true }),
    );
  }

  /** The recorded child called `name`, if any. */
  child(name: string): RecordedChild | undefined {
    return this.children.find((c) => c.name === name);
  }

  /**
   * Runs the recorded child `name` with a MockContext of its own (sharing
   * this one's log lines), for tests that go one level down.
   */
  runChild(name: string): MockChildRun {
    const child = this.child(name);
    if (!child) throw new Error(`${this.dn}: no child named ${JSON.stringify(name)} was started`);
    const ctx = new MockContext(`${this.dn}.${name}`, this.lines);
    this.signal.addEventListener("abort", () => ctx.abort(this.signal.reason), { once: true });
    return { ctx, result: child.runnable(ctx) };
  }

  private record(children: Record<string, Runnable>, opts: ChildOptions, asGroup: boolean): void {
    if (this.state !== "new") {
      throw new ChildStartError(
        this.dn,
        `children may only be started before healthy(), and the runnable is ${this.state}`,
      );
    }
    const names = Object.keys(children);
    for (const name of names) {
      validateName(this.dn, name);
      if (this.child(name)) throw new DuplicateNameError(this.dn, name, "child");
      if (this.subLoggerNames.has(name)) throw new DuplicateNameError(this.dn, name, "sub-logger");
    }
    for (const name of names) {
      this.children.push({
        name,
        runnable: children[name],
        opts,
        ...(asGroup && { group: names }),
      });
    }
  }

  private misuse(error: Error): void {
    this.failures.push(error);
    this.abort(error);
  }
}

/** A runnable running on a {@link MockContext} of its own. */
export interface MockChildRun {
  /** The context it runs on. */
  ctx: MockContext;
  /** The runnable's own promise. */
  result: Promise<void>;
}

/** A runnable started on a fresh {@link MockContext} by {@link startOnMock}. */
export interface MockRun extends MockChildRun {
  /** Aborts the context, waits for the runnable to end, and throws if it broke a rule of the tree. */
  stop(): Promise<void>;
}

/** Starts `runnable` on a new MockContext named `dn`, for a unit test that stops it at the end. */
export function startOnMock(dn: string, runnable: Runnable): MockRun {
  const ctx = new MockContext(dn);
  const result = runnable(ctx);
  return {
    ctx,
    result,
    stop: async () => {
      ctx.abort();
      await result;
      if (ctx.failures.length > 0) {
        throw new Error(
          `${dn} broke the tree's rules: ${ctx.failures.map((f) => f.message).join("; ")}`,
        );
      }
    },
  };
}
