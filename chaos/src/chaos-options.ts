/**
 * The chaos CLI's flags: `--minutes N` (default 5), `--seed N` (default a
 * random one, printed), `--nodes N` (default 5; 6 with `--hosts`),
 * `--hosts` (on a testbed, with network, clock and membership faults),
 * `--phase-b on|off` (or `--no-phase-b`; default on), `--out PATH`, `--keep`.
 *
 * Guarantees: a bad flag is a ChaosUsageError naming it; nothing is started.
 */
import { ChaosUsageError } from "./errors";
import { randomSeed } from "./prng";
import type { ChaosOptions } from "./run-chaos";

const usage =
  "usage: chaos [--minutes N] [--seed N] [--nodes N] [--hosts] [--phase-b on|off] [--out PATH] [--keep]";

function numberFlag(name: string, text: string | undefined, min: number): number {
  const n = Number(text);
  if (text === undefined || text.trim() === "" || !Number.isFinite(n) || n < min) {
    throw new ChaosUsageError(
      `--${name} needs a number ≥ ${min}, got ${text ?? "nothing"}\n${usage}`,
    );
  }
  return n;
}

/** Parses the command line (without node and the script). @throws ChaosUsageError */
export function parseChaosArgs(argv: readonly string[]): ChaosOptions & { seed: number } {
  const options: ChaosOptions = { seed: randomSeed() };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => argv[++i];
    switch (flag) {
      case "--minutes":
        options.minutes = numberFlag("minutes", value(), 0.25);
        break;
      case "--seed":
        options.seed = Math.trunc(numberFlag("seed", value(), 0));
        break;
      case "--nodes":
        options.nodes = Math.trunc(numberFlag("nodes", value(), 4));
        break;
      case "--phase-b": {
        const v = value();
        if (v !== "on" && v !== "off")
          throw new ChaosUsageError(`--phase-b takes on or off\n${usage}`);
        options.phaseB = v === "on";
        break;
      }
      case "--no-phase-b":
        options.phaseB = false;
        break;
      case "--out": {
        const v = value();
        if (!v) throw new ChaosUsageError(`--out needs a path\n${usage}`);
        options.out = v;
        break;
      }
      case "--keep":
        options.keep = true;
        break;
      case "--hosts":
        options.hosts = true;
        break;
      case "--help":
      case "-h":
        throw new ChaosUsageError(usage);
      default:
        throw new ChaosUsageError(`unknown flag ${flag}\n${usage}`);
    }
  }
  if (options.hosts && options.nodes !== undefined && options.nodes < 6) {
    throw new ChaosUsageError(
      `--hosts needs at least 6 nodes (5 consensus members and a spare), got ${options.nodes}\n${usage}`,
    );
  }
  return options;
}
