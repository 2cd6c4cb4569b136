/**
 * A node's secrets, kept apart from its record (`/nodes/<id>`, which every
 * node may watch): its cluster unlock key, at
 * `/node_secrets/<id>/cluster_unlock_key`. Written in the same guarded
 * transactions as the record that makes it meaningful (CommitNode,
 * bootstrap), deleted with the node.
 *
 * The key is sealed with the cluster secrets keyring (`secrets`, the curator
 * namespace's sealer): a CUK is half of what opens the node's data, and etcd's
 * files on every consensus member are not encrypted.
 */
import type { Namespace } from "etcd3";
import type { SecretSealer } from "@metropolis/pki";
import { clusterUnlockKeyKey } from "./keys";

/** The put that stores node `nodeId`'s cluster unlock key, sealed, for a guarded transaction's `then`. */
export function putClusterUnlockKey(
  kv: Namespace,
  secrets: SecretSealer,
  nodeId: string,
  clusterUnlockKey: Uint8Array,
): ReturnType<Namespace["put"]> {
  const key = clusterUnlockKeyKey(nodeId);
  return kv.put(key).value(secrets.seal(key, clusterUnlockKey));
}

/** Node `nodeId`'s cluster unlock key, opened, or undefined when none is kept (not committed yet). */
export async function readClusterUnlockKey(
  kv: Namespace,
  secrets: SecretSealer,
  nodeId: string,
): Promise<Buffer | undefined> {
  const key = clusterUnlockKeyKey(nodeId);
  const sealed = await kv.get(key).buffer();
  return sealed === null ? undefined : secrets.open(key, sealed);
}
