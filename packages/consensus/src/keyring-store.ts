/**
 * Where the wrapped copies of the cluster secrets keyring live in etcd: one
 * per consensus member, in the consensus namespace,
 *
 * ```
 * namespaced:consensus/secrets/keyrings/<node id>   priv.WrappedSecretKeyring
 * ```
 *
 * All functions here take the root kv (full keys). Reads of a member's own
 * copy are serializable (answered by the local member from its own data):
 * etcd 3.4 serves a learner only serializable reads and no watches ("rpc not
 * supported for learner"), and a member that just joined is a learner until
 * the autopromoter promotes it.
 */
import type { Namespace } from "etcd3";
import { nodeIdFromPublicKey } from "@metropolis/pki";
import { KeyringError } from "./errors";
import { wrappedFor } from "./keyring-wrap";

/** Full etcd key prefix of the wrapped copies. */
export const keyringCopiesPrefix = "namespaced:consensus/secrets/keyrings/";

/** Full etcd key of member `nodeId`'s wrapped copy. */
export function keyringCopyKey(nodeId: string): string {
  return `${keyringCopiesPrefix}${nodeId}`;
}

/** One member's wrapped copy as stored. */
export interface StoredCopy {
  readonly nodeId: string;
  /** Full etcd key. */
  readonly key: string;
  /** The encoded `priv.WrappedSecretKeyring`. */
  readonly value: Buffer;
  readonly modRevision: string;
  /** The raw Ed25519 public key it is wrapped for (checked to be `nodeId`'s). */
  readonly recipientPublicKey: Buffer;
}

/**
 * Member `nodeId`'s copy, or undefined when there is none. `serializable`
 * reads the local member's data (works on a learner; may lag the cluster).
 */
export async function readCopy(
  kv: Namespace,
  nodeId: string,
  options: { serializable: boolean },
): Promise<StoredCopy | undefined> {
  const res = await kv.get(keyringCopyKey(nodeId)).serializable(options.serializable).exec();
  const found = res.kvs[0];
  if (found === undefined) return undefined;
  return stored(nodeId, Buffer.from(found.value), found.mod_revision);
}

/** Every member's copy (linearizable). */
export async function listCopies(kv: Namespace): Promise<StoredCopy[]> {
  const res = await kv.getAll().prefix(keyringCopiesPrefix).exec();
  return res.kvs.map((found) =>
    stored(
      found.key.toString("utf8").slice(keyringCopiesPrefix.length),
      Buffer.from(found.value),
      found.mod_revision,
    ),
  );
}

function stored(nodeId: string, value: Buffer, modRevision: string): StoredCopy {
  const key = keyringCopyKey(nodeId);
  const recipientPublicKey = wrappedFor(value, key);
  let recipient: string;
  try {
    recipient = nodeIdFromPublicKey(recipientPublicKey);
  } catch (cause) {
    throw new KeyringError(`keyring copy at ${JSON.stringify(key)} names no valid node key`, {
      cause,
    });
  }
  if (recipient !== nodeId) {
    throw new KeyringError(
      `keyring copy at ${JSON.stringify(key)} is wrapped for ${recipient}, not for ${nodeId}`,
    );
  }
  return { nodeId, key, value, modRevision, recipientPublicKey };
}
