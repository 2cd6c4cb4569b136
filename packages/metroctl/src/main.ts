#!/usr/bin/env node
/**
 * The `metroctl` executable: runs the CLI against the process's streams and
 * environment. The first Ctrl-C aborts the running command (which ends a
 * followed log normally and a wait with exit code 130); a second one exits
 * at once.
 */
import { runMetroctl } from "./run-metroctl";

// grpc-js sets the TLS server name to the IP it dials, which Node flags as
// DEP0123 on every connection. Curators and nodes are dialled by IP by design
// (their certificates name node IDs), so that warning would only bury
// metroctl's one-line errors; every other warning is still printed.
process.removeAllListeners("warning");
process.on("warning", (warning: Error & { code?: string }) => {
  if (warning.code !== "DEP0123") process.stderr.write(`${warning.name}: ${warning.message}\n`);
});

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
