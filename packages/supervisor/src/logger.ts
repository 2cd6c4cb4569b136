/**
 * Loggers bound to a DN. Every line logged through one goes both to the root
 * logger (with a `dn` field) and to the log tree. The root logger is any
 * {@link Logger}; a winston root (the default) gets a winston logger per DN.
 */
import winston from "winston";
import TransportStream from "winston-transport";
import type { LogTree } from "./log-tree";
import type { LogMeta, Logger } from "./types";

/** Fields of a winston info object that are not structured metadata. */
const reserved = new Set(["level", "message", "dn"]);

/** The environment variable that sets the default logger's level, unless told another. */
export const defaultLogLevelEnv = "METROPOLIS_LOG_LEVEL";

/** Where winston's formats leave the finished line (triple-beam's MESSAGE). */
const MESSAGE = Symbol.for("message");

/**
 * winston's `json()` format, on `JSON.stringify`. winston's own runs
 * safe-stable-stringify with a replacer function (keys sorted; cycles and
 * BigInt handled) and was most of the cost of a line: 19 µs a line with a
 * stack trace, against 7 µs with this format and {@link LineTransport}
 * (measured with a supervisor's failure line; the group restart benchmark
 * logs two lines per restart). A JSON line needs no sorted keys, and what
 * `JSON.stringify` refuses (a cycle, a BigInt) goes through winston's own
 * `json()` as before.
 */
const winstonJson = winston.format.json();
const jsonLine = winston.format((info) => {
  try {
    // Level and message first, for whoever reads the lines themselves.
    const { level, message, ...fields } = info;
    info[MESSAGE] = JSON.stringify({ level, message, ...fields });
    return info;
  } catch {
    return winstonJson.transform(info, winstonJson.options);
  }
});

/**
 * Writes each finished line to a stream (stdout), as winston's Console
 * transport does, but without the `setImmediate` per line with which that
 * transport emits its `logged` event (nothing listens to it here).
 */
class LineTransport extends TransportStream {
  constructor(private readonly out: NodeJS.WritableStream) {
    super();
  }

  override log(info: Record<symbol, unknown>, next: () => void): void {
    this.out.write(`${String(info[MESSAGE])}\n`);
    next();
  }
}

/**
 * The default root logger: human-readable lines on a terminal, JSON lines
 * otherwise (so a log collector can parse them), each with its DN, at the
 * level named by the environment variable `levelEnv` (else `info`).
 */
export function defaultLogger(levelEnv: string = defaultLogLevelEnv): winston.Logger {
  const human = winston.format.printf(
    ({ timestamp, level, dn, message }) => `${timestamp} ${level} ${dn ?? "-"}: ${message}`,
  );
  const format = winston.format.combine(
    winston.format.timestamp(),
    process.stdout.isTTY ? human : jsonLine(),
  );
  const transport = new LineTransport(process.stdout);
  const logger = winston.createLogger({
    level: process.env[levelEnv] ?? "info",
    format,
    transports: [transport],
  });
  directWriters.set(logger, (line) => {
    const formatted = format.transform(line, format.options);
    if (typeof formatted === "object") transport.log(formatted, ignore);
  });
  return logger;
}

/** Does nothing: the callback {@link LineTransport.log} is given where nobody waits for it. */
function ignore(): void {}

/**
 * How the lines of a default logger's DN loggers reach stdout: its format,
 * then its transport, at once. winston would pass each line through the
 * logger's own object stream and the pipe to its transport (stream state,
 * a write request and callbacks per line, and a tick's delay whenever the
 * pipe is behind): 15.6 µs a line with a stack trace, against 9.0 µs
 * written at once (100,000 lines, on the 2-core machine the benchmarks ran
 * on). The default logger is this module's own: no caller can add a
 * transport or change its format, so nothing but that stream is skipped.
 */
const directWriters = new WeakMap<
  winston.Logger,
  (line: winston.Logform.TransformableInfo) => void
>();

/** A logger for `dn` that writes through `root` and into `tree`. */
export function dnLogger(root: Logger, dn: string, tree: LogTree): Logger {
  return root instanceof winston.Logger
    ? winstonDnLogger(root, dn, tree)
    : new ForwardingDnLogger(root, dn, tree, undefined);
}

/**
 * A winston logger for `dn`. It works like winston's own `child()` (an object
 * whose prototype is the root logger, with `write` overridden), but checks the
 * level before doing any work — winston itself filters only in its
 * transports, after the whole stream machinery — and copies each line into
 * the log tree.
 */
function winstonDnLogger(root: winston.Logger, dn: string, tree: LogTree): winston.Logger {
  const direct = directWriters.get(root);
  return Object.create(root, {
    write: {
      value(info: winston.Logform.TransformableInfo): boolean {
        if (!root.isLevelEnabled(info.level)) return true;
        const line = Object.assign({}, info, { dn });
        let meta: Record<string, unknown> | undefined;
        for (const key of Object.keys(line)) {
          if (reserved.has(key)) continue;
          (meta ??= {})[key] = line[key];
        }
        tree.append(dn, info.level, String(info.message), Date.now(), meta);
        if (direct === undefined) return root.write(line);
        if (!root.silent) direct(line);
        return true;
      },
    },
  }) as winston.Logger;
}

type Level = "error" | "warn" | "info" | "debug";

/**
 * A DN logger over a root logger that is not winston (console, an adapter for
 * pino, …): each line goes into the log tree and on to the root as
 * `root[level](message, { ...fields, dn })`.
 */
class ForwardingDnLogger implements Logger {
  constructor(
    private readonly root: Logger,
    private readonly dn: string,
    private readonly tree: LogTree,
    private readonly fields: LogMeta | undefined,
  ) {}

  error(message: string, meta?: LogMeta): void {
    this.write("error", message, meta);
  }

  warn(message: string, meta?: LogMeta): void {
    this.write("warn", message, meta);
  }

  info(message: string, meta?: LogMeta): void {
    this.write("info", message, meta);
  }

  debug(message: string, meta?: LogMeta): void {
    this.write("debug", message, meta);
  }

  child(meta: LogMeta): Logger {
    return new ForwardingDnLogger(this.root, this.dn, this.tree, { ...this.fields, ...meta });
  }

  isLevelEnabled(level: string): boolean {
    return this.root.isLevelEnabled?.(level) ?? true;
  }

  private write(level: Level, message: string, meta: LogMeta | undefined): void {
    if (!this.isLevelEnabled(level)) return;
    const fields = this.fields || meta ? { ...this.fields, ...meta } : undefined;
    this.tree.append(this.dn, level, String(message), Date.now(), fields);
    this.root[level](message, { ...fields, dn: this.dn });
  }
}
