/**
 * Curator.WatchRevocations: the cluster CA's revocation list as a stream,
 * for nodes (each keeps its own copy to refuse revoked certificates on its
 * Debug service). The newest CRL first, then each newer one, from the
 * leader's `Revocations` (which follows the CRL in etcd), until the client
 * cancels.
 */
import type { ServerWritableStream } from "@grpc/grpc-js";
import type { curator } from "@metropolis/proto";
import { requireCurrentNode } from "./current-node";
import type { LeaderContext } from "./leader-context";

type WatchRevocationsCall = ServerWritableStream<
  curator.WatchRevocationsRequest,
  curator.WatchRevocationsResponse
>;

/** Handles one WatchRevocations call until the client cancels it. */
export async function watchRevocations(
  ctx: LeaderContext,
  call: WatchRevocationsCall,
): Promise<void> {
  await requireCurrentNode(ctx, call);
  const watcher = ctx.revocations.changes.watch();
  const ended = new AbortController();
  const end = () => ended.abort();
  call.once("cancelled", end);
  try {
    for (;;) {
      const crl = await watcher.get({ signal: ended.signal, filter: (c) => c !== undefined });
      if (crl) call.write({ crl: crl.der });
    }
  } catch (e) {
    if (!ended.signal.aborted) throw e;
  } finally {
    call.off("cancelled", end);
    watcher.close();
  }
}
