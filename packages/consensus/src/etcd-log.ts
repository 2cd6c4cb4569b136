/**
 * etcd logs JSON lines (zap); this turns each one into a line of the
 * supervisor's log tree at the consensus DN, at etcd's own level, with its
 * structured fields kept as metadata.
 */
import type { Logger } from "winston";

const levels: Record<string, "debug" | "info" | "warn" | "error"> = {
  debug: "debug",
  info: "info",
  warn: "warn",
  error: "error",
  dpanic: "error",
  panic: "error",
  fatal: "error",
};

/** A `commandRunnable` `logLine` for etcd's output. Lines that are not JSON are logged as they are. */
export function logEtcdLine(line: string, stream: "stdout" | "stderr", logger: Logger): void {
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    entry = undefined;
  }
  if (!entry || typeof entry !== "object" || Array.isArray(entry)) {
    logger.log(stream === "stderr" ? "warn" : "info", line);
    return;
  }
  const { level, msg, ts: _ts, ...fields } = entry as Record<string, unknown>;
  logger.log(levels[String(level)] ?? "info", String(msg ?? line), fields);
}
