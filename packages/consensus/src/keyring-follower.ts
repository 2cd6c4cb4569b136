/**
 * Keeps a member's keyring in memory current with its wrapped copy in etcd:
 * loads the copy once etcd serves (a member restarted from disk, or one that
 * joined and whose copy `addNode` wrote), and takes every newer copy a
 * rotation writes.
 *
 * etcd 3.4 serves a learner only serializable reads and no watches (checked:
 * a linearizable read fails with "rpc not supported for learner", a watch is
 * never created). So the follower polls with serializable reads while its
 * copy is missing or its member is a learner, and watches the copy once the
 * member votes. A sealer that meets a key id it does not know also asks for a
 * fresh read (ClusterSecrets.refresh), so a value sealed by a rotation on
 * another member opens even before the watch delivers the new copy.
 */
import type { Etcd3, Namespace } from "etcd3";
import type { Runnable } from "@metropolis/supervisor";
import { abortableDelay } from "./abortable-delay";
import type { ClusterSecrets } from "./cluster-secrets";
import { keyringCopyKey, readCopy, type StoredCopy } from "./keyring-store";
import { unwrapKeyring } from "./keyring-wrap";

export interface KeyringFollowerOptions {
  /** The member's own etcd client. */
  readonly client: Etcd3;
  readonly nodeId: string;
  /** The node's Ed25519 private key (32-byte seed): its copy is wrapped for it. */
  readonly nodePrivateKey: Uint8Array;
  readonly secrets: ClusterSecrets;
  /** Poll interval while the copy is missing or the member is a learner. Default 250 ms. */
  readonly pollIntervalMs?: number;
}

const learnerRefusal = "not supported for learner";

/** The runnable that follows this member's copy; healthy once the keyring is loaded. */
export function keyringFollower(options: KeyringFollowerOptions): Runnable {
  const { client, nodeId, nodePrivateKey, secrets } = options;
  const kv: Namespace = client.namespace("");
  const at = keyringCopyKey(nodeId);
  const pollIntervalMs = options.pollIntervalMs ?? 250;

  return async (ctx) => {
    const take = (value: Buffer, modRevision: string): void => {
      const keyring = unwrapKeyring(value, nodePrivateKey, at);
      if (secrets.apply(keyring, BigInt(modRevision))) {
        ctx.logger.info(
          `cluster secrets keyring loaded from ${at} at revision ${modRevision}: keys ${keyring.ids.join(", ")}, current ${keyring.currentId}`,
        );
      }
    };
    const load = async (serializable: boolean): Promise<StoredCopy | undefined> => {
      const copy = await readCopy(kv, nodeId, { serializable });
      if (copy !== undefined) take(copy.value, copy.modRevision);
      return copy;
    };
    secrets.setRefresh(async () => {
      // Linearizable where the member allows it (a voter), so a rotation that
      // committed anywhere is seen; a learner can only read its own data.
      await load(false).catch((e: unknown) => {
        if (String(e).includes(learnerRefusal)) return load(true);
        throw e;
      });
    });
    let healthy = false;
    let waitingSaid = false;
    try {
      for (;;) {
        ctx.signal.throwIfAborted();
        const copy = await load(true);
        if (copy !== undefined && !healthy) {
          healthy = true;
          ctx.healthy();
        }
        if (copy === undefined) {
          if (!waitingSaid) {
            waitingSaid = true;
            ctx.logger.info(`waiting for this member's wrapped keyring at ${at}`);
          }
          await abortableDelay(pollIntervalMs, ctx.signal);
          continue;
        }
        if ((await client.maintenance.status()).isLearner) {
          await abortableDelay(pollIntervalMs, ctx.signal);
          continue;
        }
        await watchCopy(kv, at, copy.modRevision, take, ctx.signal, (message) =>
          ctx.logger.warn(message),
        );
      }
    } finally {
      secrets.setRefresh(undefined);
    }
  };
}

/**
 * Watches the copy at `at` from after `modRevision`, taking every put, until
 * `signal` aborts (resolves) or the watch fails (rejects; the loop reads again).
 */
async function watchCopy(
  kv: Namespace,
  at: string,
  modRevision: string,
  take: (value: Buffer, modRevision: string) => void,
  signal: AbortSignal,
  warn: (message: string) => void,
): Promise<void> {
  const watcher = await kv
    .watch()
    .key(at)
    .startRevision(String(BigInt(modRevision) + 1n))
    .create();
  let stop = () => undefined as void;
  const onAbort = () => stop();
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    await new Promise<void>((resolve, reject) => {
      stop = resolve;
      if (signal.aborted) resolve();
      watcher.on("put", (found) => {
        try {
          take(Buffer.from(found.value), found.mod_revision);
        } catch (e) {
          reject(e);
        }
      });
      watcher.on("delete", () =>
        warn(`this member's keyring copy ${at} was deleted; keeping the keyring in memory`),
      );
      watcher.on("error", (e) => reject(e));
    });
  } finally {
    signal.removeEventListener("abort", onAbort);
    await watcher.cancel().catch(() => undefined);
  }
}
