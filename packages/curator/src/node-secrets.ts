/**
 * A node's secrets, kept apart from its record (`/nodes/<id>`, which every
 * node may watch): its cluster unlock key, at
 * `/node_secrets/<id>/cluster_unlock_key`. Written in the same guarded
 * transactions as the record that makes it meaningful (CommitNode,
 * bootstrap), deleted with the node.
 */
import type { Namespace } from "etcd3";
import { clusterUnlockKeyKey } from "./keys";

/** The put that stores node `nodeId`'s cluster unlock key, for a guarded transaction's `then`. */
export function putClusterUnlockKey(
  kv: Namespace,
  nodeId: string,
  clusterUnlockKey: Uint8Array,
): ReturnType<Namespace["put"]> {
  return kv.put(clusterUnlockKeyKey(nodeId)).value(Buffer.from(clusterUnlockKey));
}

/** Node `nodeId`'s cluster unlock key, or undefined when none is kept (not committed yet). */
export async function readClusterUnlockKey(
  kv: Namespace,
  nodeId: string,
): Promise<Buffer | undefined> {
  return (await kv.get(clusterUnlockKeyKey(nodeId)).buffer()) ?? undefined;
}
