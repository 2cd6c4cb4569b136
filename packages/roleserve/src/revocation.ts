/**
 * The revocation worker: keeps this node's copy of the cluster CA's
 * revocation list current, so that the node's own mTLS endpoints (its Debug
 * service) refuse the certificates of deleted nodes like the curator does.
 *
 * The CRL comes from the curator leader (Curator.WatchRevocations: the
 * current one, then each newer one) and is kept on the data partition, from
 * where a restart loads it first: a node that cannot reach any curator yet
 * still refuses what was revoked before it went down. Only CRLs signed by the
 * cluster CA and newer than the one held are taken (@metropolis/curator's
 * Revocations), so neither a stale answer nor a forged file un-revokes anything.
 */
import { Revocations } from "@metropolis/curator";
import { waitFor } from "@metropolis/event";
import type { File } from "@metropolis/localstorage";
import type { curator } from "@metropolis/proto";
import type { Runnable } from "@metropolis/supervisor";
import { openStream, type CuratorStream } from "./curator-calls";
import type { RoleserveValues } from "./values";

export interface RevocationOptions {
  /** Where the CRL is kept: `data.node.revocations` of the node's storage. */
  file: File<Buffer>;
}

type WatchRevocationsCall = ReturnType<curator.CuratorClient["watchRevocations"]>;

/**
 * The revocation worker: once `values.curatorConnection` is known, publishes
 * `values.revocations` (loaded from `file` if there is one), then follows
 * WatchRevocations and keeps `file` current. Healthy once the curator's
 * first answer was taken; fails when the stream fails.
 */
export function revocationWorker(values: RoleserveValues, opts: RevocationOptions): Runnable {
  // One holder for the node's lifetime: a restart of this worker keeps what it knew.
  let revocations: Revocations | undefined;
  return async (ctx) => {
    let stream: CuratorStream<curator.WatchRevocationsResponse, WatchRevocationsCall> | undefined;
    try {
      const { connection, credentials } = await waitFor(
        values.curatorConnection,
        () => true,
        ctx.signal,
      );
      if (!revocations) {
        revocations = new Revocations(credentials.caCertificate);
        if (await opts.file.exists()) {
          await revocations
            .offer(await opts.file.read())
            .catch((e: unknown) =>
              ctx.logger.warn(`ignoring the revocation list on disk: ${String(e)}`),
            );
        }
        values.revocations.set(revocations);
      }
      const held = revocations;
      const take = async (message: curator.WatchRevocationsResponse) => {
        if (!(await held.offer(message.crl))) return;
        await opts.file.write(message.crl);
        ctx.logger.info(
          `revocation list ${held.current?.crlNumber ?? "?"}: ${held.current?.entries.length ?? 0} certificates revoked`,
        );
      };
      const opened = await openStream<curator.WatchRevocationsResponse, WatchRevocationsCall>(
        connection,
        "Curator.WatchRevocations",
        (leader) => leader.curator.watchRevocations({}),
        ctx.signal,
      );
      stream = opened.stream;
      await take(opened.first);
      ctx.healthy();
      for (;;) await take(await stream.next(ctx.signal));
    } catch (e) {
      if (ctx.signal.aborted) return;
      throw e;
    } finally {
      stream?.cancel();
    }
  };
}
