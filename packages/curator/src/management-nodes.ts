/**
 * Node records as the Management service reads and changes them: finding
 * the node a request names, listing all nodes, and the compare-and-swap
 * loop every change of a single node goes through.
 */
import { nodeIdFromPublicKey, ED25519_PUBLIC_KEY_LENGTH } from "@metropolis/pki";
import { api, common, priv } from "@metropolis/proto";
import { status } from "@grpc/grpc-js";
import { CuratorError, InvalidArgumentError, NotFoundError } from "./errors";
import { nodeKey } from "./keys";
import type { LeaderContext } from "./leader-context";
import type { Txn } from "./leadership";
import { checkNodeId, encodeNode, findNode, type StoredNode } from "./node-record";

/** How a Management request names its node (the `node` oneof). */
export type NodeSelector =
  { $case: "id"; id: string } | { $case: "pubkey"; pubkey: Buffer } | undefined;

/**
 * A node-changing transaction retries this often when another write to the
 * same node slips in between read and commit; each conflict means someone
 * else's write committed, so running out means heavy contention, not a bug.
 */
const maxConflictRetries = 10;

/** Checks a node selector and returns the ID it names (the ID of a public key is derived from it). */
export function selectedNodeId(selector: NodeSelector): string {
  if (selector === undefined)
    throw new InvalidArgumentError("the node must be given, by id or by pubkey");
  if (selector.$case === "id") return checkNodeId(selector.id);
  return nodeIdFromPublicKey(checkPublicKey(selector.pubkey, "pubkey"));
}

/** Checks that `key` is a raw Ed25519 public key. */
export function checkPublicKey(key: Uint8Array, field: string): Buffer {
  if (key.length !== ED25519_PUBLIC_KEY_LENGTH) {
    throw new InvalidArgumentError(
      `${field} must be ${ED25519_PUBLIC_KEY_LENGTH} bytes, not ${key.length}`,
    );
  }
  return Buffer.from(key);
}

/**
 * The node a request names; NOT_FOUND when there is none. A node selected
 * by public key must hold exactly that key: IDs are derived from only the
 * first 16 bytes, so another key could share the ID.
 */
export async function resolveNode(ctx: LeaderContext, selector: NodeSelector): Promise<StoredNode> {
  const id = selectedNodeId(selector);
  const found = await findNode(ctx.kv, id);
  const wrongKey =
    selector?.$case === "pubkey" &&
    found !== undefined &&
    !found.node.publicKey.equals(selector.pubkey);
  if (!found || wrongKey) throw new NotFoundError(`node ${id} not found`);
  return found;
}

/** What a change of one node decided, given the node as read. */
export type NodeChange =
  /** Nothing to write (the change is already in place). */
  | { kind: "unchanged" }
  /** Write this record instead. */
  | { kind: "put"; node: priv.Node }
  /** Delete the record, and with it these further keys. */
  | { kind: "delete"; alsoDelete: string[] };

/**
 * Applies `decide` to the current record of the node `selector` names, and
 * commits its outcome in a transaction guarded by leadership and by the
 * record's mod revision; on a conflicting write, reads again and re-decides.
 * `decide` may throw (a refusal) and must not have side effects, since it
 * can run more than once. Returns the record as it was last read.
 */
export async function changeNode(
  ctx: LeaderContext,
  selector: NodeSelector,
  decide: (stored: StoredNode) => NodeChange,
): Promise<{ before: StoredNode; change: NodeChange }> {
  for (let attempt = 0; attempt < maxConflictRetries; attempt++) {
    const stored = await resolveNode(ctx, selector);
    const change = decide(stored);
    if (change.kind === "unchanged") return { before: stored, change };
    const key = nodeKey(stored.id);
    const txn: Txn = ctx.leadership.txn().and(key, "Mod", "==", stored.modRevision);
    if (change.kind === "put") txn.then(ctx.kv.put(key).value(encodeNode(change.node)));
    else
      txn.then(ctx.kv.delete().key(key), ...change.alsoDelete.map((k) => ctx.kv.delete().key(k)));
    if (await ctx.leadership.commit(txn)) return { before: stored, change };
    ctx.logger.debug(`node ${stored.id} changed concurrently; retrying`);
  }
  throw new CuratorError(status.ABORTED, "the node kept changing concurrently; retry");
}

/** Whether `roles` holds `role`. */
export function hasRole(roles: common.NodeRoles | undefined, role: api.NodeRole): boolean {
  switch (role) {
    case api.NodeRole.CONSENSUS_MEMBER:
      return roles?.consensusMember !== undefined;
    case api.NodeRole.KUBERNETES_CONTROLLER:
      return roles?.kubernetesController !== undefined;
    case api.NodeRole.KUBERNETES_WORKER:
      return roles?.kubernetesWorker !== undefined;
    default:
      return false;
  }
}

/** Whether `roles` holds any role at all. */
export function hasAnyRole(roles: common.NodeRoles | undefined): boolean {
  return (
    hasRole(roles, api.NodeRole.CONSENSUS_MEMBER) ||
    hasRole(roles, api.NodeRole.KUBERNETES_CONTROLLER) ||
    hasRole(roles, api.NodeRole.KUBERNETES_WORKER)
  );
}

/** The part of the owner's view of a node that its record decides: the record without its secrets. */
export function recordView({ id, node }: StoredNode): api.Node {
  return {
    id,
    pubkey: node.publicKey,
    state: node.state,
    status: node.status,
    roles: node.roles ?? {},
    labels: new Map(node.labels),
    health: common.NodeHealth.UNKNOWN,
    timeSinceHeartbeatMs: undefined,
  };
}

/** The owner's view of a node: the record without its secrets, with the leader's view of its health. */
export function toApiNode(ctx: Pick<LeaderContext, "heartbeats">, stored: StoredNode): api.Node {
  return {
    ...recordView(stored),
    health: ctx.heartbeats.health(stored.id),
    timeSinceHeartbeatMs: ctx.heartbeats.sinceLast(stored.id),
  };
}
