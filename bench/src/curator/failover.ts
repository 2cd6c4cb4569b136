/**
 * Scenario 1 of the curator benchmark, failover: three curators with a short
 * election lease, the leader in a process of its own, the two followers in
 * this one. The leader's process is SIGKILLed — it cannot resign, so its
 * election key only goes when its lease expires — and the time until a
 * follower's `curator.leader` names the follower itself is measured.
 * Target (absolute, see bench/README.md): lease TTL + 1 s, on the median of
 * several rounds.
 */
import { performance } from "node:perf_hooks";
import { waitFor } from "@metropolis/event";
import { median, type Row } from "../report";
import type { BenchContext } from "./bench-context";
import { CuratorProcess } from "./curator-processes";
import { startLocalCurator } from "./local-curator";

/** One round: time from SIGKILL of the leader's process until a follower leads. */
async function failoverRound(ctx: BenchContext): Promise<number> {
  const leader = await CuratorProcess.start(ctx);
  try {
    await leader.leading();
    const followers = [await startLocalCurator(ctx), await startLocalCurator(ctx)];
    try {
      for (const f of followers)
        await waitFor(
          f.curator.leader,
          (l) => l?.nodeId === leader.nodeId,
          AbortSignal.timeout(10_000),
        );
      const done = new AbortController();
      const signal = AbortSignal.any([done.signal, AbortSignal.timeout(20_000)]);
      const started = performance.now();
      leader.kill("SIGKILL");
      await Promise.any(
        followers.map((f) => waitFor(f.curator.leader, (l) => l?.nodeId === f.nodeId, signal)),
      );
      const elapsed = performance.now() - started;
      done.abort();
      return elapsed;
    } finally {
      for (const f of followers) await f.harness.cleanup({ timeoutMs: 10_000 }).catch(() => {});
    }
  } finally {
    await leader.stop();
  }
}

/** The failover time of every round, in milliseconds. */
export async function measureFailover(ctx: BenchContext): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < ctx.config.failoverRounds; i++) times.push(await failoverRound(ctx));
  return times;
}

/** The report rows of the failover rounds. */
export function failoverRows(ctx: BenchContext, times: readonly number[]): Row[] {
  const { leaderTtlSeconds, failoverRounds } = ctx.config;
  const failoverMs = median(times);
  const target = (leaderTtlSeconds + 1) * 1000;
  return [
    {
      measure: `(1) failover after SIGKILL of the leader, TTL ${leaderTtlSeconds} s (median of ${failoverRounds})`,
      value: failoverMs,
      unit: "ms",
      target: `< ${target} ms`,
      met: failoverMs < target,
    },
    {
      measure: "(1) failover, slowest round",
      value: Math.max(...times),
      unit: "ms",
    },
  ];
}
