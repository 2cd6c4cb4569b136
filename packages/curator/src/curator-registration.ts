/**
 * How nodes get into the cluster: RegisterNode (NEW), the owner's approval
 * (Management.ApproveNode: STANDBY), CommitNode (UP, with a certificate),
 * and JoinNode (an UP node coming back after a reboot).
 *
 * A node that is not in the cluster yet has no certificate from the cluster
 * CA, so these calls authenticate the caller by a self-signed certificate:
 * TLS proves the caller holds the key, and the key is what is pinned — the
 * node's identity key for Register and Commit, its join key for Join.
 *
 * Every write is a compare-and-swap on the records it read, guarded by
 * leadership; a lost race is retried from a fresh read (a handful of times:
 * each loss means someone else's write landed, so this always progresses).
 */
import { timingSafeEqual } from "node:crypto";
import { status } from "@grpc/grpc-js";
import { etcdCertificateKv } from "@metropolis/consensus";
import { nodeIdFromPublicKey } from "@metropolis/pki";
import { common, curator, priv } from "@metropolis/proto";
import {
  CuratorError,
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
} from "./errors";
import { guardNewCertificate, issueNodeCertificate, nodeCertificateEntry } from "./curator-pki";
import { requireEphemeral, type Caller } from "./identity";
import { clusterConfigurationKey, joinKeyKey, nodeKey } from "./keys";
import type { LeaderContext } from "./leader-context";
import { checkLabelBounds, validateLabels } from "./labels";
import { encodeNode, findNode } from "./node-record";
import { checkProtocolVersion } from "./protocol-check";
import { putClusterUnlockKey, readClusterUnlockKey } from "./node-secrets";
import { readRegisterTicket } from "./register-ticket";

/** Join keys and cluster unlock keys are 32 bytes (an Ed25519 key; an AES-256 key). */
const KEY_LENGTH = 32;
/** Compare-and-swap attempts before giving up with ABORTED. */
const ATTEMPTS = 5;

function checkKeyLength(name: string, key: Uint8Array): Buffer {
  if (key.length !== KEY_LENGTH)
    throw new InvalidArgumentError(`${name} must be ${KEY_LENGTH} bytes, got ${key.length}`);
  return Buffer.from(key);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Runs `attempt` until it returns a result (not undefined, which means "lost a race, retry"). */
async function retrying<T>(what: string, attempt: () => Promise<T | undefined>): Promise<T> {
  for (let i = 0; i < ATTEMPTS; i++) {
    const result = await attempt();
    if (result !== undefined) return result;
  }
  throw new CuratorError(
    status.ABORTED,
    `${what}: concurrent updates won ${ATTEMPTS} times in a row; retry`,
  );
}

async function checkTicket(ctx: LeaderContext, ticket: Uint8Array): Promise<void> {
  const stored = await readRegisterTicket(ctx.kv, ctx.secrets);
  // No ticket yet (nobody asked Management for one) matches nothing. The
  // length check leaks only the length, which is fixed and public.
  if (!stored || stored.length === 0 || !sameBytes(Buffer.from(ticket), Buffer.from(stored))) {
    throw new PermissionDeniedError("invalid register ticket");
  }
}

async function storagePolicy(ctx: LeaderContext): Promise<common.StoragePolicy> {
  const res = await ctx.kv.get(clusterConfigurationKey).exec();
  if (!res.kvs[0])
    throw new FailedPreconditionError("cluster has no configuration: not bootstrapped");
  return common.ClusterConfiguration.decode(res.kvs[0].value).storagePolicy;
}

/** RegisterNode: the caller's key becomes a NEW node. */
export async function registerNode(
  ctx: LeaderContext,
  caller: Caller,
  req: curator.RegisterNodeRequest,
): Promise<curator.RegisterNodeResponse> {
  const { publicKey } = requireEphemeral(caller);
  // Sizes first (cheap, and they reveal only the public limits), then the
  // ticket, then the content: a caller without the ticket learns nothing
  // about its labels, and no large value is looked at.
  const joinKey = checkKeyLength("join key", req.joinKey);
  const labels = req.labels;
  checkLabelBounds(labels);
  await checkTicket(ctx, req.registerTicket);
  validateLabels(labels);
  const id = nodeIdFromPublicKey(publicKey);
  checkProtocolVersion(`node ${id}`, req.protocolVersion);

  await retrying(`registering ${id}`, async () => {
    const existing = await findNode(ctx.kv, id);
    if (existing) {
      // A retry after a lost answer: fine as long as nothing moved on.
      if (existing.node.state !== common.NodeState.NEW) {
        throw new FailedPreconditionError(`node ${id} is already registered and past NEW`);
      }
      if (!sameBytes(existing.node.joinKey, joinKey)) {
        throw new FailedPreconditionError(`node ${id} is already registered with another join key`);
      }
      return true;
    }
    const node = priv.Node.fromPartial({ publicKey, joinKey, state: common.NodeState.NEW, labels });
    const txn = ctx.leadership
      .txn()
      .and(nodeKey(id), "Create", "==", 0)
      .and(joinKeyKey(joinKey), "Create", "==", 0)
      .then(
        ctx.kv.put(nodeKey(id)).value(encodeNode(node)),
        ctx.kv.put(joinKeyKey(joinKey)).value(id),
      );
    if (await ctx.leadership.commit(txn)) return true;
    // Either the node appeared meanwhile (handled above on retry) or the
    // join key belongs to another node, which no retry fixes.
    const owner = await ctx.kv.get(joinKeyKey(joinKey)).string();
    if (owner !== null && owner !== id)
      throw new FailedPreconditionError("join key is already used by another node");
    return undefined;
  });
  return { storagePolicy: await storagePolicy(ctx) };
}

/** CommitNode: an approved (STANDBY) node gets its certificate and becomes UP. */
export async function commitNode(
  ctx: LeaderContext,
  caller: Caller,
  req: curator.CommitNodeRequest,
): Promise<curator.CommitNodeResponse> {
  const { publicKey } = requireEphemeral(caller);
  const cuk = checkKeyLength("cluster unlock key", req.clusterUnlockKey);
  const id = nodeIdFromPublicKey(publicKey);
  const authority = await ctx.clusterCa.authority(etcdCertificateKv(ctx.kv));
  const entry = nodeCertificateEntry(ctx.clusterCa, id, publicKey);

  return retrying(`committing ${id}`, async () => {
    const found = await findNode(ctx.kv, id);
    if (!found) throw new NotFoundError(`node ${id} is not registered`);
    const { node } = found;
    if (node.state === common.NodeState.NEW)
      throw new PermissionDeniedError(`node ${id} is not approved yet`);
    if (node.state === common.NodeState.UP) {
      // The node retries because it missed our answer: give it the same
      // certificate — but never let it believe in an unlock key we did not keep.
      const kept = await readClusterUnlockKey(ctx.kv, ctx.secrets, id);
      if (kept === undefined || !sameBytes(kept, cuk)) {
        throw new FailedPreconditionError(
          `node ${id} is already committed with another cluster unlock key`,
        );
      }
      const stored = await entry.load(etcdCertificateKv(ctx.kv));
      if (!stored)
        throw new FailedPreconditionError(`node ${id} is UP but has no certificate on record`);
      return { caCertificate: authority.certificate.der, nodeCertificate: stored.certificate.der };
    }
    if (node.state !== common.NodeState.STANDBY) {
      throw new FailedPreconditionError(
        `node ${id} is ${common.nodeStateToJSON(node.state)}, not STANDBY`,
      );
    }
    const certificate = await issueNodeCertificate(authority, publicKey);
    const txn = ctx.leadership.txn().and(nodeKey(id), "Mod", "==", found.modRevision);
    const putCertificate = guardNewCertificate(ctx.kv, txn, entry, certificate);
    const up = { ...node, state: common.NodeState.UP };
    txn.then(
      ctx.kv.put(nodeKey(id)).value(encodeNode(up)),
      putCertificate,
      putClusterUnlockKey(ctx.kv, ctx.secrets, id, cuk),
    );
    if (!(await ctx.leadership.commit(txn))) return undefined;
    return { caCertificate: authority.certificate.der, nodeCertificate: certificate.der };
  });
}

/** JoinNode: an UP node, authenticated by its join key, gets its cluster unlock key back. */
export async function joinNode(
  ctx: LeaderContext,
  caller: Caller,
  req: curator.JoinNodeRequest,
): Promise<curator.JoinNodeResponse> {
  const { publicKey: joinKey } = requireEphemeral(caller);
  const id = await ctx.kv.get(joinKeyKey(joinKey)).string();
  if (id === null) throw new PermissionDeniedError("this key is not the join key of any node");
  const found = await findNode(ctx.kv, id);
  // The mapping and the record are written together; a mismatch means the
  // node was deleted or re-registered, and the key no longer lets anyone in.
  if (!found || !sameBytes(found.node.joinKey, joinKey)) {
    throw new PermissionDeniedError("this key is not the join key of any node");
  }
  if (found.node.state !== common.NodeState.UP) {
    throw new FailedPreconditionError(
      `node ${id} is ${common.nodeStateToJSON(found.node.state)}, not UP`,
    );
  }
  checkProtocolVersion(`node ${id}`, req.protocolVersion);
  const clusterUnlockKey = await readClusterUnlockKey(ctx.kv, ctx.secrets, id);
  if (clusterUnlockKey === undefined) {
    throw new CuratorError(status.DATA_LOSS, `node ${id} is UP but its cluster unlock key is gone`);
  }
  return { clusterUnlockKey };
}
