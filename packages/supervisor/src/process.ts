/**
 * `@metropolis/supervisor/process`: a child process as a supervised
 * runnable. Uses only Node's built-ins.
 *
 * @example
 * ```ts
 * import { commandRunnable } from "@metropolis/supervisor/process";
 *
 * ctx.run("server", commandRunnable("python3", ["-m", "http.server", "8000"], {
 *   ready: /Serving HTTP/,
 *   graceMs: 2000,
 * }));
 * ```
 *
 * @module
 */
export {
  commandRunnable,
  CommandStartError,
  ProcessExitedError,
  processExitOutputLineChars,
  processExitOutputLines,
  type CommandOptions,
} from "./command-runnable";
