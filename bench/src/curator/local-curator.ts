/**
 * A curator in the benchmark's own process, under a supervisor of its own:
 * the followers of the failover scenario, which see the new leader first.
 */
import { Curator } from "@metropolis/curator";
import { testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import type { BenchContext } from "./bench-context";
import { curatorIdentity } from "./cluster";

export interface LocalCurator {
  nodeId: string;
  curator: Curator;
  harness: TestHarness;
}

/** Starts a curator of the context's cluster in this process; resolves once it is healthy. */
export async function startLocalCurator(ctx: BenchContext): Promise<LocalCurator> {
  const id = await curatorIdentity(ctx.cluster, ctx.nextHost());
  const curator = new Curator({
    nodeId: id.nodeId,
    tls: id.tls,
    host: id.host,
    port: id.port,
    consensus: ctx.cluster.consensus,
    leaderTtlSeconds: ctx.config.leaderTtlSeconds,
  });
  const harness = testHarness(async (sup) => {
    sup.run("curator", curator.run);
    sup.healthy();
    await sup.untilAborted();
  });
  await harness.waitFor("root.curator", "healthy", { timeoutMs: 20_000 });
  return { nodeId: id.nodeId, curator, harness };
}
