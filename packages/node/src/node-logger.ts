/**
 * The root winston logger of `metropolis-node`: every line of every
 * runnable goes through it (the supervisor's DN loggers add a `dn` field to
 * each line before handing it to the root logger's transports).
 *
 * Two formats, chosen by whether stdout is a terminal:
 * - on a terminal, one human-readable line: `2024-05-01T12:00:00.000Z info root.role: started`,
 *   then any structured fields as JSON, and a stack trace on the lines below;
 * - otherwise (a service manager, a pipe, a test harness), one JSON object per
 *   line, `{"time","level","dn","message","meta"}`, so a log collector can
 *   parse it without guessing.
 */
import type { Writable } from "node:stream";
import winston, { type Logger } from "winston";

export interface NodeLoggerOptions {
  /** Human-readable lines (true) or JSON lines (false). Default: `process.stdout.isTTY`. */
  tty?: boolean;
  /** Where lines go. Default: stdout. */
  stream?: Writable;
  /** Lowest level logged. Default: `METROPOLIS_LOG_LEVEL`, else `info`. */
  level?: string;
}

/** One line as the JSON format writes it. */
export interface NodeLogLine {
  /** ISO 8601 time. */
  time: string;
  level: string;
  /** DN of the runnable that logged it; "" for lines logged outside the supervision tree. */
  dn: string;
  message: string;
  /** Structured fields logged with the line (`{}` if none). */
  meta: Record<string, unknown>;
}

/** Fields of a winston info object that are not structured metadata. */
const notMeta = new Set(["level", "message", "dn", "timestamp"]);

function metaOf(info: winston.Logform.TransformableInfo): Record<string, unknown> {
  const meta: Record<string, unknown> = {};
  for (const key of Object.keys(info)) if (!notMeta.has(key)) meta[key] = info[key];
  return meta;
}

/** JSON.stringify that never throws: bigints as strings, a circular value described. */
function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? v.toString() : v));
  } catch (e) {
    return JSON.stringify({ unserializable: e instanceof Error ? e.message : String(e) });
  }
}

const jsonLine = winston.format.printf((info) => {
  const line: NodeLogLine = {
    time: String(info.timestamp),
    level: info.level,
    dn: typeof info.dn === "string" ? info.dn : "",
    message: String(info.message),
    meta: metaOf(info),
  };
  return safeJson(line);
});

const humanLine = winston.format.printf((info) => {
  const { stack, ...meta } = metaOf(info);
  const dn = typeof info.dn === "string" && info.dn !== "" ? info.dn : "-";
  let line = `${String(info.timestamp)} ${info.level} ${dn}: ${String(info.message)}`;
  if (Object.keys(meta).length > 0) line += ` ${safeJson(meta)}`;
  if (typeof stack === "string") line += `\n${stack}`;
  return line;
});

/**
 * The node's root logger; pass it to `supervise(root, { logger })`. Errors
 * logged as values (`logger.error(err)`) keep their stack in `meta.stack`.
 */
export function nodeLogger(opts: NodeLoggerOptions = {}): Logger {
  const tty = opts.tty ?? process.stdout.isTTY === true;
  return winston.createLogger({
    level: opts.level ?? process.env.METROPOLIS_LOG_LEVEL ?? "info",
    format: winston.format.combine(
      winston.format.errors({ stack: true }),
      winston.format.timestamp(),
      tty ? humanLine : jsonLine,
    ),
    transports: [new winston.transports.Stream({ stream: opts.stream ?? process.stdout })],
  });
}
