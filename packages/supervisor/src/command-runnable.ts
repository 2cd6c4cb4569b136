/**
 * commandRunnable: a child process as a supervised runnable. The process is
 * the runnable: its output lines go to the runnable's logger (and so to the
 * log tree), it is healthy once it has started (or once it says or proves it
 * is ready), and its exit — whatever the code — is a failure, so the
 * supervisor restarts it. Aborting the runnable terminates the process
 * politely (SIGTERM), then firmly (SIGKILL) after a grace period.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { abortableSleep } from "./abortable-sleep";
import { SupervisorError } from "./errors";
import type { Logger, RunContext, Runnable } from "./types";

/** How {@link commandRunnable} runs its process. */
export interface CommandOptions {
  /**
   * The process's working directory.
   * @default the current directory
   */
  cwd?: string;
  /**
   * The process's environment.
   * @default `process.env`
   */
  env?: NodeJS.ProcessEnv;
  /**
   * Healthy once an output line matches; without it (and without `probe`)
   * healthy once started.
   * @default none: healthy once spawned
   */
  ready?: RegExp | ((line: string) => boolean);
  /**
   * Healthy once this resolves true; polled every `probeIntervalMs` until it does.
   * @default none
   */
  probe?: (signal: AbortSignal) => Promise<boolean>;
  /**
   * Milliseconds between two calls of `probe`.
   * @default 100
   */
  probeIntervalMs?: number;
  /**
   * Milliseconds between SIGTERM and SIGKILL when the runnable is aborted (5 s, as OTP's workers).
   * @default 5000
   */
  graceMs?: number;
  /**
   * Logs one output line.
   * @default stdout lines at info, stderr lines at warn
   */
  logLine?: (line: string, stream: "stdout" | "stderr", logger: Logger) => void;
  /**
   * Called once the process has been spawned, e.g. to learn its PID.
   * @default none
   */
  onSpawn?: (child: ChildProcess) => void;
}

/** The process could not be started (e.g. the binary does not exist). */
export class CommandStartError extends SupervisorError {
  constructor(
    /** DN of the runnable concerned. */
    readonly dn: string,
    /** The command line as it was started. */
    readonly command: string,
    cause: Error,
  ) {
    super(`${dn}: cannot start ${command}: ${cause.message}`, { cause });
  }
}

/** How many of a process's last output lines {@link ProcessExitedError} keeps. */
export const processExitOutputLines = 3;
/** How many characters of each of those lines it keeps. */
export const processExitOutputLineChars = 300;

/**
 * The process exited while it was supposed to run. Its message ends with
 * the process's last output lines (at most {@link processExitOutputLines},
 * each cut to {@link processExitOutputLineChars}): a process that exits at
 * once usually says why in its last line (etcd's "fatal" entry, say), and
 * without it a failure seen only as a report or in a test's error is
 * "exited with code 1" and nothing more.
 */
export class ProcessExitedError extends SupervisorError {
  constructor(
    /** DN of the runnable concerned. */
    readonly dn: string,
    /** The command line as it was started. */
    readonly command: string,
    /** Exit code, or null when a signal ended it. */
    readonly code: number | null,
    /** The signal that ended it, or null when it exited. */
    readonly signal: NodeJS.Signals | null,
    /** Its last output lines, stdout and stderr as they were read, oldest first. */
    readonly lastOutput: readonly string[] = [],
  ) {
    const how = signal ? `on signal ${signal}` : `with code ${code}`;
    const said = lastOutput.length > 0 ? `; its last output: ${lastOutput.join(" | ")}` : "";
    super(`${dn}: ${command} exited ${how}${said}`);
  }
}

/** The last lines of a process's output, bounded (see {@link ProcessExitedError}). */
class OutputTail {
  readonly lines: string[] = [];

  add(line: string): void {
    const cut =
      line.length > processExitOutputLineChars
        ? `${line.slice(0, processExitOutputLineChars)}…`
        : line;
    if (this.lines.push(cut) > processExitOutputLines) this.lines.shift();
  }
}

const defaultLogLine = (line: string, stream: "stdout" | "stderr", logger: Logger) =>
  stream === "stdout" ? logger.info(line) : logger.warn(line);

/** Runs `command args…` as a supervised runnable. */
export function commandRunnable(
  command: string,
  args: readonly string[],
  opts: CommandOptions = {},
): Runnable {
  const { ready, probe, probeIntervalMs = 100, graceMs = 5000, logLine = defaultLogLine } = opts;
  const matches = ready instanceof RegExp ? (line: string) => ready.test(line) : ready;
  return async (ctx: RunContext) => {
    let healthy = false;
    // Set once the process has ended: its probe stops, and a probe answered
    // after that says nothing of it. A caller that runs the command again
    // in the same runnable (consensus starts a join etcd gave up again) had
    // the first probe, still polling, mark the runnable healthy a second time.
    let exited = false;
    const markHealthy = () => {
      if (healthy || exited || ctx.signal.aborted) return;
      healthy = true;
      ctx.healthy();
    };
    const child = spawn(command, args, {
      cwd: opts.cwd,
      env: opts.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let spawned = false;
    // A process that never started reports only through 'error'; one that ran
    // reports its exit through 'close', once its output has been read.
    const startFailed = new Promise<Error>((resolve) => child.once("error", resolve));
    const ended = Promise.race([
      startFailed,
      new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        child.once("close", (code, signal) => resolve({ code, signal })),
      ),
    ]);
    const tail = new OutputTail();
    for (const stream of ["stdout", "stderr"] as const) {
      createInterface({ input: child[stream] }).on("line", (line) => {
        tail.add(line);
        logLine(line, stream, ctx.logger);
        if (matches?.(line)) markHealthy();
      });
    }
    let killTimer: NodeJS.Timeout | undefined;
    const terminate = () => {
      child.kill("SIGTERM");
      killTimer = setTimeout(() => {
        ctx.logger.warn(`still running ${graceMs} ms after SIGTERM; sending SIGKILL`);
        child.kill("SIGKILL");
      }, graceMs);
    };
    child.once("spawn", () => {
      spawned = true;
      ctx.logger.info(`started ${command} (pid ${child.pid})`);
      opts.onSpawn?.(child);
      if (ctx.signal.aborted) return terminate();
      ctx.signal.addEventListener("abort", terminate, { once: true });
      if (probe) void pollProbe(ctx, probe, probeIntervalMs, () => healthy || exited, markHealthy);
      else if (!matches) markHealthy();
    });
    const result = await ended;
    exited = true;
    clearTimeout(killTimer);
    ctx.signal.removeEventListener("abort", terminate);
    if (!spawned) throw new CommandStartError(ctx.dn, command, await startFailed);
    if (result instanceof Error) throw result;
    if (ctx.signal.aborted) return;
    throw new ProcessExitedError(ctx.dn, command, result.code, result.signal, tail.lines);
  };
}

async function pollProbe(
  ctx: RunContext,
  probe: (signal: AbortSignal) => Promise<boolean>,
  intervalMs: number,
  done: () => boolean,
  markHealthy: () => void,
): Promise<void> {
  while (!done() && !ctx.signal.aborted) {
    const ok = await probe(ctx.signal).catch((e: unknown) => {
      ctx.logger.debug(`readiness probe failed: ${e instanceof Error ? e.message : String(e)}`);
      return false;
    });
    if (ok) return markHealthy();
    await abortableSleep(intervalMs, ctx.signal).catch(() => undefined);
  }
}
