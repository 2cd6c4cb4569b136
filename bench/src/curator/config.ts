/**
 * The curator benchmark's sizes and time limits, in one object every
 * scenario reads from its context. `METROPOLIS_BENCH_NODES` sets the number
 * of simulated nodes (default 1,000) for a quick, reduced run.
 */

export interface BenchConfig {
  /** The curators' election lease. */
  readonly leaderTtlSeconds: number;
  /** Failover rounds, of which the median is reported. */
  readonly failoverRounds: number;
  /** Simulated nodes that register, watch and send heartbeats. */
  readonly nodes: number;
  /** Registrations in flight at once. */
  readonly registerConcurrency: number;
  /** Timed Watch backlog rounds, after one warm-up round. */
  readonly watchRounds: number;
  /** How long every node sends heartbeats, once a second. */
  readonly heartbeatSeconds: number;
  /** Heartbeat streams opened at a time before the heartbeats are measured. */
  readonly streamOpenConcurrency: number;
  /** Deadline of every unary call. */
  readonly rpcDeadlineMs: number;
  /** The whole benchmark is stopped if it takes longer than this. */
  readonly watchdogMs: number;
}

/** The benchmark's configuration: the defaults, and the node count from the environment if set. */
export function benchConfig(env: NodeJS.ProcessEnv = process.env): BenchConfig {
  return {
    leaderTtlSeconds: 2,
    failoverRounds: 5,
    nodes: positiveInteger("METROPOLIS_BENCH_NODES", env.METROPOLIS_BENCH_NODES, 1000),
    registerConcurrency: 20,
    watchRounds: 9,
    heartbeatSeconds: 10,
    streamOpenConcurrency: 50,
    rpcDeadlineMs: 30_000,
    watchdogMs: 6 * 60_000,
  };
}

function positiveInteger(name: string, text: string | undefined, otherwise: number): number {
  if (text === undefined || text === "") return otherwise;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`${name} must be a positive integer, not ${text}`);
  return n;
}
