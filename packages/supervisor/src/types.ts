/**
 * The public types of the supervision tree: what a runnable sees (RunContext),
 * how a child is supervised (ChildOptions), and what the owner of a tree can
 * observe (Supervisor, NodeStatus, Transition).
 */
import type { ReportsOptions, RestartCount, SupervisorReport } from "./report-types";

/** Structured fields of a log line, besides its level and message. */
export type LogMeta = Record<string, unknown>;

/**
 * The logger the supervisor writes to and hands to runnables: four levels
 * that take a message and optional structured fields. A winston Logger
 * satisfies it (winston is the default), and so does `console`; pino does
 * too, though pino reads a second argument as a format value, not as fields,
 * so pass pino through a small adapter that calls `pino.info(meta, message)`.
 */
export interface Logger {
  /** Logs a failure. */
  error(message: string, meta?: LogMeta): void;
  /** Logs something wrong that the code recovers from. */
  warn(message: string, meta?: LogMeta): void;
  /** Logs a milestone. */
  info(message: string, meta?: LogMeta): void;
  /** Logs detail for debugging. */
  debug(message: string, meta?: LogMeta): void;
  /** A logger that adds `meta` to every line (winston's and pino's `child`). Optional. */
  child?(meta: LogMeta): Logger;
  /**
   * Whether lines at `level` are written. Optional: the supervisor uses it to
   * skip work for disabled levels (winston and pino have it); without it,
   * every line is recorded in the log tree and passed on.
   */
  isLevelEnabled?(level: string): boolean;
}

/**
 * A supervised unit of work. It runs until its work is done (it then calls
 * `ctx.done()` and returns) or until `ctx.signal` aborts. Any other way of
 * ending — a rejection, a synchronous throw, a return without `done()` — is a
 * failure, after which the supervisor restarts it with backoff.
 */
export type Runnable = (ctx: RunContext) => Promise<void>;

/** What a runnable gets from its supervisor. One context belongs to one run. */
export interface RunContext {
  /**
   * Aborted when this run must stop: its parent stops, a group sibling died,
   * or the tree stops; its reason says which. An `AbortSignal` (instanceof
   * too) to wait on or hand to anything that takes one (`events.once`,
   * child_process, fetch, `AbortSignal.any`), though not Node's own class:
   * a lighter one, made on first use (see run-signal.ts for the few
   * differences).
   */
  readonly signal: AbortSignal;
  /** Distinguished name of this runnable, e.g. `root.cluster.consensus`. */
  readonly dn: string;
  /**
   * A logger bound to this DN; its lines also go to the log tree. With the
   * default (winston) root logger it is a winston logger with a `dn` field.
   */
  readonly logger: Logger;
  /** Starts a supervised child named `name`. Only legal before `healthy()`. */
  run(name: string, runnable: Runnable, opts?: ChildOptions): void;
  /**
   * Starts children as a one-for-all group: when one of them dies, all of them
   * are aborted and restarted together. Only legal before `healthy()`.
   */
  runGroup(children: Record<string, Runnable>, opts?: ChildOptions): void;
  /** Declares this runnable healthy: it has started all its children and is serving. */
  healthy(): void;
  /** Declares this runnable done: it will return and must not be restarted. */
  done(): void;
  /** A logger at `<dn>.<name>`. Reserves `name`: no child can take it afterwards. */
  subLogger(name: string): Logger;
  /**
   * Publishes a short text saying what this run is doing ("leading", "lease
   * unconfirmed") on its node of the tree: `NodeStatus.status`, drawn by
   * `metroctl tree` and the observer. Each call replaces the last; "" clears
   * it. Kept as one line of at most 120 characters (`maxStatusLength`):
   * line breaks and other control characters become spaces, and a longer text
   * is cut, ending in "…". Tree watchers (`watchTree`) see a change like any
   * other. Cleared when the run ends: a restarted run starts without one. A
   * call from a run that has ended is ignored. `machineRunnable` sets it to
   * the machine's state on every change.
   */
  status(text: string): void;
  /** Resolves after `ms`, or rejects with the abort reason when `signal` aborts. */
  sleep(ms: number): Promise<void>;
  /**
   * Resolves when this run must stop (when `signal` aborts; at once if it
   * already has). Most long-running runnables end with
   * `await ctx.untilAborted()`: it makes no signal, and the members of a
   * group share one promise (about 240 bytes less per idle runnable than
   * a listener on `signal`).
   */
  untilAborted(): Promise<void>;
}

/**
 * OTP restart types.
 * - `permanent`: always restarted after it ends, except after `done()`.
 * - `transient`: a clean return (with or without `done()`) ends it for good; only failures restart it.
 * - `temporary`: never restarted; its death does not affect its group siblings.
 */
export type RestartType = "permanent" | "transient" | "temporary";

/** Exponential backoff between restarts of a failed runnable. */
export interface BackoffOptions {
  /**
   * First delay, in milliseconds.
   * @default 500
   */
  initialMs?: number;
  /**
   * Factor applied after every restart.
   * @default 1.5
   */
  multiplier?: number;
  /**
   * Randomisation factor: a delay d becomes d × (1 ± jitter).
   * @default 0.5
   */
  jitter?: number;
  /**
   * Cap of the (unrandomised) delay, in milliseconds.
   * @default 60000
   */
  maxMs?: number;
}

/**
 * Restart intensity: more than `maxRestarts` restarts within `periodMs` and the
 * child is given up on; its failure escalates to its parent.
 */
export interface IntensityOptions {
  /** Restarts allowed within `periodMs`; one more and the child is given up on. */
  maxRestarts: number;
  /** The sliding window, in milliseconds. */
  periodMs: number;
}

/** How a child is supervised. */
export interface ChildOptions {
  /**
   * How the child is restarted.
   * @default "permanent"
   */
  restart?: RestartType;
  /**
   * Restart intensity: how often it may restart before it is given up on.
   * @default unlimited restarts
   */
  intensity?: IntensityOptions;
  /**
   * Backoff between its restarts.
   * @default the supervisor's backoff (`SupervisorOptions.backoff`)
   */
  backoff?: BackoffOptions;
}

/** Notified on every state transition of every node of a tree. */
export interface SupervisorMetrics {
  /** Called synchronously on every transition; must not throw. */
  onTransition(transition: Transition): void;
}

/** Options of a supervision tree. */
export interface SupervisorOptions {
  /**
   * Default backoff of every node.
   * @default defaultBackoff: 500 ms initial, ×1.5, ±50% jitter, 60 s cap
   */
  backoff?: BackoffOptions;
  /**
   * How the root runnable itself is supervised.
   * @default permanent, unlimited restarts
   */
  root?: ChildOptions;
  /**
   * The root logger: every DN's logger writes through it, with a `dn` field.
   * Any {@link Logger} (winston, console, an adapter for pino).
   * @default a winston logger to the console: human-readable lines on a terminal, JSON lines otherwise, at the level named by the {@link SupervisorOptions.logLevelEnv} variable, else `info`
   */
  logger?: Logger;
  /**
   * The environment variable that sets the level of the default logger (it is
   * read only when `logger` is not given).
   * @default "METROPOLIS_LOG_LEVEL"
   */
  logLevelEnv?: string;
  /**
   * Lines kept per DN in the log tree.
   * @default 1000
   */
  logBufferLines?: number;
  /**
   * Told every state transition of every node (e.g. `PrometheusSupervisorMetrics`
   * from `@metropolis/supervisor/prometheus`).
   * @default none
   */
  metrics?: SupervisorMetrics;
  /**
   * Reports kept per tree for late readers (`recentReports()`,
   * `reports({ history: true })`); 0 keeps none.
   * @default 1000
   */
  reportHistory?: number;
}

/**
 * - `new`: running, not yet healthy.
 * - `healthy`: running and declared healthy.
 * - `done`: finished its work; not restarted unless aborted.
 * - `dead`: failed; will be restarted once its subtree has settled (unless given up).
 * - `canceled`: ended because it was aborted.
 */
export type NodeState = "new" | "healthy" | "done" | "dead" | "canceled";

/** A state change of one node. */
export interface Transition {
  /** The node's DN. */
  dn: string;
  /** Its state before; undefined for a node's first state. */
  from: NodeState | undefined;
  /** Its new state. */
  to: NodeState;
  /** Milliseconds since the epoch. */
  at: number;
  /** The failure, for transitions to `dead`. */
  error?: Error;
}

/** A snapshot of one node of the tree. */
export interface NodeStatus {
  /** The node's DN. */
  dn: string;
  /** Its current state. */
  state: NodeState;
  /** When the node entered `state` (milliseconds since the epoch). */
  since: number;
  /** How many times this node has been restarted. */
  restarts: number;
  /** The message of its last failure. */
  lastError?: string;
  /** Set while a restart is scheduled. */
  nextRestartInMs?: number;
  /** True when the node failed too often and will not be restarted. */
  givenUp?: boolean;
  /**
   * What its current run said it is doing (`RunContext.status`): one line of
   * at most 120 characters. Unset when the run published none, and between
   * runs.
   */
  status?: string;
}

/** One line of the log tree. */
export interface LogEntry {
  /** The DN that logged it. */
  dn: string;
  /** Its level (`error`, `warn`, `info`, `debug`, …). */
  level: string;
  /** Its message. */
  message: string;
  /** Milliseconds since the epoch. */
  time: number;
  /** Structured fields logged with the line, other than level and message. */
  meta?: Record<string, unknown>;
}

/** Result of `Supervisor.stop()`. */
export interface StopReport {
  /** True when every runnable settled before the timeout. */
  clean: boolean;
  /** DNs of runnables still running when the timeout passed. */
  laggards: string[];
}

/** A running supervision tree. */
export interface Supervisor {
  /** Settles when the whole tree has ended; rejects when a failure escalates past the root. */
  readonly done: Promise<void>;
  /** Aborts everything; resolves when all runnables settled or `timeoutMs` (default 5 s) passed. */
  stop(opts?: { timeoutMs?: number }): Promise<StopReport>;
  /** A snapshot of every node, parents before children. */
  tree(): NodeStatus[];
  /** Subscribes to transitions; returns the unsubscribe function. */
  onTransition(cb: (t: Transition) => void): () => void;
  /** Log lines of `dnPrefix` and its subtree, oldest first. */
  logs(dnPrefix: string, opts?: { tail?: number }): LogEntry[];
  /**
   * Subscribes to log lines as they enter the log tree (every DN, the same
   * entries `logs()` returns); returns the unsubscribe function. `cb` runs
   * synchronously inside the logging call: it must not throw or log.
   */
  onLog(cb: (entry: LogEntry) => void): () => void;
  /**
   * Reports (started, healthy, done, died, restartScheduled, givenUp,
   * escalated) as an async iterator: with `history`, the recent ones first,
   * then live ones, until the tree has ended or the reader stops (`break`).
   * A reader that falls `bufferSize` behind loses the oldest waiting reports;
   * the next one it reads counts them in `dropped`.
   */
  reports(opts?: ReportsOptions): AsyncIterableIterator<SupervisorReport>;
  /**
   * Subscribes to reports as they are made; returns the unsubscribe
   * function. `cb` runs synchronously inside the tree: it must not throw,
   * block, or modify the report.
   */
  onReport(cb: (report: SupervisorReport) => void): () => void;
  /** The kept reports of `dnPrefix` and its subtree (default: all), oldest first; `tail` keeps the newest N. */
  recentReports(opts?: { dnPrefix?: string; tail?: number }): SupervisorReport[];
  /**
   * The tree (as `tree()` gives it) now, and again after every change,
   * coalesced: a burst of changes in one turn of the event loop yields one
   * snapshot. Ends once the tree has ended, or when the reader stops.
   */
  watchTree(): AsyncIterableIterator<NodeStatus[]>;
  /**
   * The runnables restarted most after failures within the last `windowMs`
   * (restarts along with a failed group sibling or parent do not count),
   * most first, at most `limit` (default 10) of them.
   */
  topRestarts(opts: { windowMs: number; limit?: number }): RestartCount[];
}
