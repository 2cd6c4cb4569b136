/**
 * What metroctl talks to outside itself: two output streams, the
 * environment and an abort signal. `main.ts` passes the process's; tests pass
 * their own and run metroctl in-process.
 */

/** Anything metroctl can write text to: a process stream, a PassThrough, a test sink. */
export interface OutputStream {
  write(chunk: string): unknown;
  /** True for a terminal: only then does metroctl draw spinners. */
  isTTY?: boolean;
}

/** The outside world of one metroctl run. */
export interface MetroctlIo {
  /** Results: tables, JSON, log lines. */
  stdout: OutputStream;
  /** Errors, warnings and progress. */
  stderr: OutputStream;
  /** Environment (HOME, XDG_CONFIG_HOME); default `process.env`. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Aborted on Ctrl-C: ends `logs --follow` normally and interrupts waits. */
  signal?: AbortSignal;
}

/** Writes `line` and a newline. */
export function writeLine(stream: OutputStream, line = ""): void {
  stream.write(line + "\n");
}
