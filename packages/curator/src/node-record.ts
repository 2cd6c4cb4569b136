/**
 * Node records in etcd (`/nodes/<id>`, a `private.Node`), read with
 * validation: a record that does not decode is reported, never half-used.
 */
import type { Namespace } from "etcd3";
import { priv } from "@metropolis/proto";
import { isNodeId } from "@metropolis/pki";
import { quoted } from "./bounded-text";
import { CuratorError, InvalidArgumentError, NotFoundError } from "./errors";
import { nodeKey, nodesPrefix } from "./keys";
import { status } from "@grpc/grpc-js";

/** A node record as stored, with the mod revision it was read at (for compare-and-swap). */
export interface StoredNode {
  id: string;
  node: priv.Node;
  modRevision: string;
}

/** Checks a node ID from a request. */
export function checkNodeId(id: unknown): string {
  if (typeof id !== "string")
    throw new InvalidArgumentError(`node ID is a ${typeof id}, not a string`);
  if (!isNodeId(id)) {
    throw new InvalidArgumentError(
      `invalid node ID ${quoted(id)}: expected metropolis-<32 hex digits>`,
    );
  }
  return id;
}

export function decodeNode(id: string, bytes: Buffer): priv.Node {
  try {
    return priv.Node.decode(bytes);
  } catch (e) {
    throw new CuratorError(
      status.DATA_LOSS,
      `node record ${id} is corrupt: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
}

/** The record of node `id`, or undefined. */
export async function findNode(kv: Namespace, id: string): Promise<StoredNode | undefined> {
  const res = await kv.get(nodeKey(id)).exec();
  const entry = res.kvs[0];
  if (!entry) return undefined;
  return { id, node: decodeNode(id, entry.value), modRevision: entry.mod_revision };
}

/**
 * Every node record, in key order, read from etcd now (DATA_LOSS if one
 * does not decode).
 * Reads that decide a destructive change use this; listings for display go
 * through the leader's copy (node-record-mirror.ts).
 */
export async function listNodes(kv: Namespace): Promise<StoredNode[]> {
  const res = await kv.getAll().prefix(nodesPrefix).exec();
  return res.kvs.map((entry) => {
    const id = entry.key.toString().slice(nodesPrefix.length);
    return { id, node: decodeNode(id, entry.value), modRevision: entry.mod_revision };
  });
}

/** The record of node `id`; NOT_FOUND when there is none. */
export async function getNode(kv: Namespace, id: string): Promise<StoredNode> {
  const found = await findNode(kv, checkNodeId(id));
  if (!found) throw new NotFoundError(`node ${id} not found`);
  return found;
}

/** The encoded record, for puts in guarded transactions. */
export function encodeNode(node: priv.Node): Buffer {
  return Buffer.from(priv.Node.encode(node).finish());
}
