/**
 * Progress of long waits: a spinner on stderr saying what metroctl waits
 * for — but only on a terminal. Piped or captured stderr gets nothing, so
 * logs and scripts never see spinner frames.
 *
 * One spinner per stream at a time: progress started while another is
 * showing (a call to the cluster inside `wait`) stays silent, rather than
 * two spinners fighting over one line.
 */
import ora, { type Ora } from "ora";
import type { OutputStream } from "./io";

/** A line of progress that can be changed and removed. */
export interface Progress {
  /** Replaces what the spinner says. */
  update(text: string): void;
  /** Removes the spinner. Idempotent. */
  stop(): void;
}

/** Options of {@link startProgress}. */
export interface ProgressOptions {
  /**
   * Show the spinner only once the wait has lasted this long (ms): quick
   * calls then never flash one. Default 0.
   */
  delayMs?: number;
}

const silent: Progress = { update: () => undefined, stop: () => undefined };

/** Streams a spinner is showing on. */
const busy = new WeakSet<OutputStream>();

/** Starts a spinner saying `text` on `stream` when it is a terminal; a no-op otherwise. */
export function startProgress(
  stream: OutputStream,
  text: string,
  opts: ProgressOptions = {},
): Progress {
  if (!stream.isTTY || busy.has(stream)) return silent;
  busy.add(stream);
  let current = text;
  let spinner: Ora | undefined;
  const show = () => {
    spinner = ora({
      text: current,
      stream: stream as NodeJS.WritableStream,
      // Enabled explicitly: ora would turn itself off under CI variables even on a terminal.
      isEnabled: true,
      // ora would otherwise put stdin in raw mode, which swallows Ctrl-C.
      discardStdin: false,
    }).start();
  };
  const delay = opts.delayMs ?? 0;
  const timer = delay > 0 ? setTimeout(show, delay) : undefined;
  if (delay <= 0) show();
  let stopped = false;
  return {
    update: (next) => {
      current = next;
      if (spinner && !stopped) spinner.text = next;
    },
    stop: () => {
      if (stopped) return;
      stopped = true;
      clearTimeout(timer);
      spinner?.stop();
      busy.delete(stream);
    },
  };
}

/** Runs `fn` with a spinner saying `text`, and removes it however `fn` ends. */
export async function withProgress<T>(
  stream: OutputStream,
  text: string,
  fn: (progress: Progress) => Promise<T>,
  opts: ProgressOptions = {},
): Promise<T> {
  const progress = startProgress(stream, text, opts);
  try {
    return await fn(progress);
  } finally {
    progress.stop();
  }
}
