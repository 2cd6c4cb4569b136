/**
 * Settings of the scale simulator, and its command line: `--nodes N` is the
 * largest cluster simulated; the simulator measures at every size of its
 * ladder below N too (1,000, 2,500, 5,000, 10,000), growing one cluster, so
 * that the report shows how each cost grows with the node count;
 * `--no-ladder` measures N alone; `--hosts K` runs the simulated nodes in K
 * processes; `--attach-wave W` starts the new nodes' workers W at a time,
 * each wave once the one before is HEALTHY (0: all at once); `--observer`
 * also opens `metroctl observe`'s cluster view in Chromium at each size
 * (scale/observer-view.ts); `--freeze` makes the failovers a leader that
 * hangs instead of one that dies.
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
  /**
   * The longest any "until every node is HEALTHY" may take before the
   * simulator gives up. It grows with the largest size, so that a figure
   * the issue asks for at 10,000 nodes is measured, not given up: the
   * 10,000-node failover with owners gave up at 300 s with 8,794 HEALTHY.
   * @default 60 ms per node of the largest size, at least 300 s (600 s at 10,000)
   */
  readonly healthyTimeoutMs: number;
  /**
   * Processes the simulated nodes run in (see scale/node-hosts.ts).
   * @default one per 1,250 nodes of the largest size
   */
  readonly hosts: number;
  /**
   * New nodes whose workers start at once; the next wave starts once they
   * are all HEALTHY. A wave is a cold start of that many nodes: each makes
   * its TLS handshakes at the same moment, and on this 2-core machine the
   * simulated nodes' own handshakes (thousands of clients that in a cluster
   * have a machine each) saturate both cores beyond about 1,500 at once.
   * 0 starts every new node at once.
   * @default 1000
   */
  readonly attachWave: number;
  /**
   * Measure the observer's cluster view at each size (needs Debian's
   * Chromium: scripts/ensure-chromium.sh).
   * @default false
   */
  readonly observer: boolean;
  /**
   * How the failovers end the leader: `kill` (SIGKILL: its connections are
   * reset at once) or `freeze` (SIGSTOP, as a hung process or a machine cut
   * off: its connections stay open, and only deadlines notice; it is killed
   * once every node is back, and restarted).
   * @default "kill"
   */
  readonly leaderFault: "kill" | "freeze";
}

/** Bad command line. */
export class ScaleUsageError extends Error {
  constructor(message: string) {
    super(
      `${message}\nusage: npm run bench:scale -- [--nodes N] [--no-ladder] [--hosts K] [--attach-wave W] [--observer] [--freeze] (default 1000; --no-ladder: N only; --hosts: processes the nodes run in, default one per 1,250 nodes; --attach-wave: nodes started at once, default 1000, 0 all; --observer: measure metroctl observe's page in Chromium too; --freeze: stop the leader in the failovers instead of killing it)`,
    );
    this.name = new.target.name;
  }
}

/** The integer value of flag `name` (`--name N` or `--name=N`) at `argv[i]`, and the next index. */
function integerFlag(
  argv: readonly string[],
  i: number,
  name: string,
  min: number,
  max: number,
): { value: number; next: number } | undefined {
  const arg = argv[i];
  const inline = arg.startsWith(`--${name}=`);
  if (arg !== `--${name}` && !inline) return undefined;
  const text = inline ? arg.slice(name.length + 3) : argv[i + 1];
  const n = Number(text);
  if (text === undefined || !Number.isInteger(n) || n < min || n > max)
    throw new ScaleUsageError(`--${name} must be an integer from ${min} to ${max}, not ${text}`);
  return { value: n, next: inline ? i + 1 : i + 2 };
}

/** Reads the command line `argv` (without node and script). */
export function scaleConfig(argv: readonly string[]): ScaleConfig {
  let nodes = 1000;
  let hosts: number | undefined;
  let ladder = true;
  let attachWave = 1000;
  let observer = false;
  let leaderFault: ScaleConfig["leaderFault"] = "kill";
  for (let i = 0; i < argv.length;) {
    if (argv[i] === "--no-ladder" || argv[i] === "--observer" || argv[i] === "--freeze") {
      if (argv[i] === "--no-ladder") ladder = false;
      else if (argv[i] === "--observer") observer = true;
      else leaderFault = "freeze";
      i++;
      continue;
    }
    const flag = integerFlag(argv, i, "nodes", 10, 50_000);
    if (flag) {
      nodes = flag.value;
      i = flag.next;
      continue;
    }
    const waveFlag = integerFlag(argv, i, "attach-wave", 0, 50_000);
    if (waveFlag) {
      attachWave = waveFlag.value;
      i = waveFlag.next;
      continue;
    }
    const hostsFlag = integerFlag(argv, i, "hosts", 1, 64);
    if (!hostsFlag) throw new ScaleUsageError(`unknown argument ${JSON.stringify(argv[i])}`);
    hosts = hostsFlag.value;
    i = hostsFlag.next;
  }
  return {
    sizes: ladder ? [...LADDER.filter((s) => s < nodes), nodes] : [nodes],
    leaderTtlSeconds: 10,
    heartbeatIntervalMs: defaultHeartbeatIntervalMs,
    steadySeconds: 15,
    watchers: 10,
    changes: 20,
    owners: 10,
    healthyTimeoutMs: Math.max(300_000, nodes * 60),
    hosts: hosts ?? Math.ceil(nodes / 1250),
    attachWave,
    observer,
    leaderFault,
  };
}
