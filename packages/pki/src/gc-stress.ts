/**
 * A test's way to show that code using Node's key objects does not hang
 * under garbage collection (see generateDerKeyPair in ed25519.ts): the code
 * runs in a fresh Node process whose collector runs far more often than
 * usual, so that a collection lands inside Node's native key code.
 */
import { spawnSync } from "node:child_process";

/** How a script run by {@link runUnderGcStress} ended. */
export interface GcStressOutcome {
  /** The signal that ended it: `SIGTERM` when it ran past its time (a hang). */
  signal: NodeJS.Signals | null;
  status: number | null;
  stderr: string;
}

/**
 * Runs `script` (CommonJS, as `node -e` takes it) in a new Node process with
 * `--stress-compaction` and a 1 MiB young generation, and returns how it
 * ended; a process still running after `timeoutMs` is sent SIGTERM (by
 * its PID) and waited for.
 * @param timeoutMs @default 110000
 */
export function runUnderGcStress(script: string, timeoutMs = 110_000): GcStressOutcome {
  const child = spawnSync(
    process.execPath,
    ["--stress-compaction", "--max-semi-space-size=1", "-e", script],
    { timeout: timeoutMs, encoding: "utf8" },
  );
  return { signal: child.signal, status: child.status, stderr: child.stderr };
}
