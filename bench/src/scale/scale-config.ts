/**
 * Settings of the scale simulator, and its command line: `--nodes N` is the
 * largest cluster simulated; the simulator measures at every size of its
 * ladder below N too (1,000, 2,500, 5,000, 10,000), growing one cluster, so
 * that the report shows how each cost grows with the node count;
 * `--no-ladder` measures N alone.
 */
import { defaultHeartbeatIntervalMs } from "@metropolis/roleserve";

/** Sizes measured on the way to `--nodes`. */
export const LADDER = [1000, 2500, 5000, 10_000] as const;

export interface ScaleConfig {
  /** The node counts measured, ascending. */
  readonly sizes: readonly number[];
  /** The curators' election lease: the production default (the curator's). */
  readonly leaderTtlSeconds: number;
  /** Simulated nodes' heartbeat interval: the production default (the node's). */
  readonly heartbeatIntervalMs: number;
  /** The steady-state window in which heartbeat latency and leader cost are measured. */
  readonly steadySeconds: number;
  /** Watchers of the change fan-out, and changes made. */
  readonly watchers: number;
  readonly changes: number;
  /** Owner clients listing every node once a second, in the second failover. */
  readonly owners: number;
  /** The longest any "until every node is HEALTHY" may take before the simulator gives up. */
  readonly healthyTimeoutMs: number;
}

/** Bad command line. */
export class ScaleUsageError extends Error {
  constructor(message: string) {
    super(
      `${message}\nusage: npm run bench:scale -- [--nodes N] [--no-ladder] (default 1000; --no-ladder: N only)`,
    );
    this.name = new.target.name;
  }
}

/** Reads `--nodes N` (or `--nodes=N`) from `argv` (without node and script). */
export function scaleConfig(argv: readonly string[]): ScaleConfig {
  let nodes = 1000;
  let ladder = true;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--no-ladder") {
      ladder = false;
      continue;
    }
    const text = arg === "--nodes" ? argv[++i] : arg.startsWith("--nodes=") ? arg.slice(8) : null;
    if (text === null) throw new ScaleUsageError(`unknown argument ${JSON.stringify(arg)}`);
    const n = Number(text);
    if (text === undefined || !Number.isInteger(n) || n < 10 || n > 50_000)
      throw new ScaleUsageError(`--nodes must be an integer from 10 to 50000, not ${text}`);
    nodes = n;
  }
  return {
    sizes: ladder ? [...LADDER.filter((s) => s < nodes), nodes] : [nodes],
    leaderTtlSeconds: 10,
    heartbeatIntervalMs: defaultHeartbeatIntervalMs,
    steadySeconds: 15,
    watchers: 10,
    changes: 20,
    owners: 10,
    healthyTimeoutMs: 180_000,
  };
}
