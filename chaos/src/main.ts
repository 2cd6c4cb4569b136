#!/usr/bin/env node
/**
 * The chaos CLI (`npm run chaos -- --minutes 10 --seed 7`): one chaos run
 * (run-chaos.ts) with the flags of chaos-options.ts. Exit 0 when the run
 * passed, 1 when the checker found an anomaly, an invariant failed, a
 * process was left behind or the run could not be carried out, 2 for a bad
 * flag. Ctrl-C ends the process; the run's cleanup stops the nodes.
 */
import { Testbed } from "@metropolis/local-cluster";
import { parseChaosArgs } from "./chaos-options";
import { ChaosUsageError } from "./errors";
import { runChaos } from "./run-chaos";

async function main(): Promise<number> {
  let options;
  try {
    options = parseChaosArgs(process.argv.slice(2));
  } catch (e) {
    if (e instanceof ChaosUsageError) {
      process.stderr.write(e.message + "\n");
      return 2;
    }
    throw e;
  }
  if (options.hosts) {
    const availability = Testbed.available();
    if (!availability.ok) {
      process.stderr.write(`chaos: --hosts cannot run here: ${availability.reason}\n`);
      return 1;
    }
  }
  process.stdout.write(`chaos: seed ${options.seed} (replay with --seed ${options.seed})\n`);
  try {
    const report = await runChaos(options);
    return report.passed ? 0 : 1;
  } catch (e) {
    process.stderr.write(
      `chaos: the run failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`,
    );
    return 1;
  }
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`chaos: ${String(e)}\n`);
    process.exit(1);
  },
);
