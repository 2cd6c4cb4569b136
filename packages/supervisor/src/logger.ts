/**
 * Winston loggers bound to a DN. Every line logged through one goes both to
 * the root logger's transports (with a `dn` field) and to the log tree.
 */
import winston, { type Logger } from "winston";
import type { LogTree } from "./log-tree";

/** Fields of a winston info object that are not structured metadata. */
const reserved = new Set(["level", "message", "dn"]);

/**
 * The default root logger: human-readable lines on a terminal, JSON lines
 * otherwise (so a log collector can parse them), each with its DN.
 */
export function defaultLogger(): Logger {
  const human = winston.format.printf(
    ({ timestamp, level, dn, message }) => `${timestamp} ${level} ${dn ?? "-"}: ${message}`,
  );
  return winston.createLogger({
    level: process.env.METROPOLIS_LOG_LEVEL ?? "info",
    format: winston.format.combine(
      winston.format.timestamp(),
      process.stdout.isTTY ? human : winston.format.json(),
    ),
    transports: [new winston.transports.Console()],
  });
}

/**
 * A logger for `dn`. It works like winston's own `child()` (an object whose
 * prototype is the root logger, with `write` overridden), but checks the level
 * before doing any work — winston itself filters only in its transports,
 * after the whole stream machinery — and copies each line into the log tree.
 */
export function dnLogger(root: Logger, dn: string, tree: LogTree): Logger {
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
        tree.append({
          dn,
          level: info.level,
          message: String(info.message),
          time: Date.now(),
          ...(meta && { meta }),
        });
        return root.write(line);
      },
    },
  }) as Logger;
}
