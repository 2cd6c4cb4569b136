#!/usr/bin/env node
/**
 * The `metroctl` executable: runs the CLI against the process's streams and
 * environment. The first Ctrl-C aborts the running command (which ends a
 * followed log normally and a wait with exit code 130); a second one exits
 * at once.
 *
 * It loads only what every run needs (commander and the command table);
 * a command's code is loaded when that command runs. This is the entry
 * esbuild bundles into `bundle/metroctl.js`, the package's `bin`.
 */
import { runMetroctl } from "./run-metroctl";
import { silenceIpServerNameWarning } from "./warnings";

silenceIpServerNameWarning();

const interrupt = new AbortController();
process.on("SIGINT", () => {
  if (interrupt.signal.aborted) process.exit(130);
  interrupt.abort();
});

void runMetroctl(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  signal: interrupt.signal,
}).then((code) => {
  process.exitCode = code;
  // Let the process end even if the operator never presses Ctrl-C.
  process.removeAllListeners("SIGINT");
});
