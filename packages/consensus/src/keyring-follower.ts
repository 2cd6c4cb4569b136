/**
 * Keeps a member's keyring in memory current with its wrapped copy in etcd:
 * loads the copy once etcd serves (a member restarted from disk, or one that
 * joined and whose copy `addNode` wrote), and takes every newer copy a
 * rotation writes.
 *
 * A learner can read its copy but not watch it (key-follower.ts). A sealer that meets a key id it does not know also asks for a
 * fresh read (ClusterSecrets.refresh), so a value sealed by a rotation on
 * another member opens even before the watch delivers the new copy.
 */
import type { Etcd3, Namespace } from "etcd3";
import type { Runnable } from "@metropolis/supervisor";
import type { ClusterSecrets } from "./cluster-secrets";
import { followKey } from "./key-follower";
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
    try {
      await followKey(
        {
          client,
          key: at,
          take,
          onFirst: () => ctx.healthy(),
          onMissing: () => ctx.logger.info(`waiting for this member's wrapped keyring at ${at}`),
          onDelete: () =>
            ctx.logger.warn(
              `this member's keyring copy ${at} was deleted; keeping the keyring in memory`,
            ),
          pollIntervalMs: options.pollIntervalMs,
        },
        ctx.signal,
      );
    } finally {
      secrets.setRefresh(undefined);
    }
  };
}
