/**
 * The public types of supervisor reports (OTP's SASL supervisor, progress
 * and crash reports), of the live tree and of the restart window. Kept apart
 * from types.ts so that they can grow without touching it.
 */

/** A failure as a report carries it: plain, JSON-safe strings, each bounded in size. */
export interface ReportError {
  /** `error.name`, e.g. `ProcessExitedError`; at most {@link maxReportErrorNameChars}. */
  name: string;
  /** `error.message`; at most {@link maxReportErrorMessageChars} (cut with `…`). */
  message: string;
  /** `error.stack`, if it had one; at most {@link maxReportErrorStackChars} (cut with `…`). */
  stack?: string;
}

/** Longest `ReportError.name` kept. */
export const maxReportErrorNameChars = 128;
/** Longest `ReportError.message` kept. */
export const maxReportErrorMessageChars = 1024;
/** Longest `ReportError.stack` kept. */
export const maxReportErrorStackChars = 4096;

/** What every report has. */
interface ReportBase {
  /** Per tree, from 1, one more for every report: a gap means reports this reader missed. */
  seq: number;
  /** DN of the runnable the report is about. */
  dn: string;
  /** Milliseconds since the epoch. */
  time: number;
  /**
   * Set on the first report a subscriber gets after some were dropped for it
   * (it read too slowly, see `ReportsOptions.bufferSize`): how many.
   */
  dropped?: number;
}

/** A progress report: the runnable was started (first run or a restart). */
export interface StartedReport extends ReportBase {
  /** Tells the report kinds apart. */
  kind: "started";
  /** Restarts before this run (0: the first run). */
  restarts: number;
}

/** A progress report: the runnable declared itself healthy. */
export interface HealthyReport extends ReportBase {
  /** Tells the report kinds apart. */
  kind: "healthy";
}

/** A progress report: the runnable finished its work (or, transient, returned cleanly). */
export interface DoneReport extends ReportBase {
  /** Tells the report kinds apart. */
  kind: "done";
}

/** A crash report: the runnable failed. */
export interface DiedReport extends ReportBase {
  /** Tells the report kinds apart. */
  kind: "died";
  /** What it failed with. */
  error: ReportError;
}

/** A supervisor report: the failed runnable will be started again after `delayMs`. */
export interface RestartScheduledReport extends ReportBase {
  /** Tells the report kinds apart. */
  kind: "restartScheduled";
  /** Its backoff: how long until it starts again (0: at once). */
  delayMs: number;
  /** Restarts after failures since it was last healthy (1: the first), as its backoff counts them. */
  attempt: number;
}

/** A supervisor report: the runnable failed more often than its restart intensity allows. */
export interface GivenUpReport extends ReportBase {
  /** Tells the report kinds apart. */
  kind: "givenUp";
  /** The intensity it exceeded: more than this many restarts... */
  maxRestarts: number;
  /** ...within this many milliseconds. */
  periodMs: number;
  /** The last failure. */
  error?: ReportError;
}

/** A supervisor report: a given-up runnable's failure was propagated to its parent. */
export interface EscalatedReport extends ReportBase {
  /** Tells the report kinds apart. */
  kind: "escalated";
  /** DN of the parent that now fails; undefined past the root (the whole tree fails). */
  to?: string;
  /** The EscalationError the parent fails with. */
  error: ReportError;
}

/** One report of a supervision tree. */
export type SupervisorReport =
  | StartedReport
  | HealthyReport
  | DoneReport
  | DiedReport
  | RestartScheduledReport
  | GivenUpReport
  | EscalatedReport;

/** The kinds of reports. */
export type SupervisorReportKind = SupervisorReport["kind"];

/** How `Supervisor.reports()` reads. */
export interface ReportsOptions {
  /**
   * First the tree's recent reports (its history, `SupervisorOptions.reportHistory`),
   * then live ones: `true` for all of the history, a number for its last N
   * (after the DN filter). Default: live ones only.
   */
  history?: boolean | number;
  /** Only reports of this DN and below (`root.a` covers `root.a.b`, not `root.ab`). Default: all. */
  dnPrefix?: string;
  /**
   * Most reports that wait for this reader. When a slow reader falls this
   * far behind, the oldest waiting report is dropped, and the next report it
   * reads says in `dropped` how many were lost: the tree never buffers
   * without bound for a reader. Default 1000.
   */
  bufferSize?: number;
}

/** One line of `Supervisor.topRestarts()`. */
export interface RestartCount {
  /** DN of the runnable. */
  dn: string;
  /**
   * Restarts after failures within the window (not restarts along with a
   * failed group sibling or parent); saturates at {@link restartWindowCapacity}.
   */
  restarts: number;
}

/** Restart times kept per DN for `topRestarts()`: a window never counts more than this. */
export const restartWindowCapacity = 128;
