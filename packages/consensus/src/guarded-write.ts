/**
 * Compare-and-swap writes guarded by a key that must still hold: the curator
 * leader's election key, for the writes of a rotation. A leader that lost its
 * lease (partitioned, stopped) has lost its election key, so a rotation it
 * started can never overwrite what the next leader writes.
 */
import type { Namespace } from "etcd3";
import { GuardLostError } from "./errors";

/** A key, by its full etcd key, that must still exist with this create revision. */
export interface WriteGuard {
  /** Full etcd key, namespace prefix included (e.g. `namespaced:curator//leader/<lease>`). */
  readonly key: string;
  /** Its create revision when the caller started. */
  readonly createRevision: string;
}

/** What a swap replaces: the value's key and the mod revision it was read at. */
export interface SwapTarget {
  readonly key: string | Buffer;
  /** The mod revision the value was read at; "0" for "does not exist yet". */
  readonly modRevision: string;
  /** The lease the value is attached to ("0" or absent: none); kept by the swap. */
  readonly lease?: string;
}

/**
 * Replaces the value at `target.key` by `value` if `guard` holds and the value
 * is still the one read at `target.modRevision`. Returns the revision of the
 * write, or undefined when the value changed meanwhile (read it again); throws
 * {@link GuardLostError} when the guard no longer holds.
 */
export async function guardedSwap(
  kv: Namespace,
  guard: WriteGuard,
  target: SwapTarget,
  value: Buffer,
): Promise<bigint | undefined> {
  const put = kv.put(target.key).value(value);
  if (target.lease !== undefined && target.lease !== "0") put.lease(target.lease);
  return guardedCommit(kv, guard, target, put);
}

/** Like {@link guardedSwap}, deleting the value instead of replacing it. */
export async function guardedDelete(
  kv: Namespace,
  guard: WriteGuard,
  target: SwapTarget,
): Promise<bigint | undefined> {
  return guardedCommit(kv, guard, target, kv.delete().key(target.key));
}

async function guardedCommit(
  kv: Namespace,
  guard: WriteGuard,
  target: SwapTarget,
  operation: ReturnType<Namespace["put"]> | ReturnType<Namespace["delete"]>,
): Promise<bigint | undefined> {
  const result = await kv
    .if(guard.key, "Create", "==", guard.createRevision)
    .and(target.key, "Mod", "==", target.modRevision)
    .then(operation)
    .commit();
  if (result.succeeded) return BigInt(result.header.revision);
  await checkGuard(kv, guard);
  return undefined;
}

/** Throws {@link GuardLostError} unless `guard` still holds. */
export async function checkGuard(kv: Namespace, guard: WriteGuard): Promise<void> {
  const found = await kv.get(guard.key).exec();
  if (found.kvs.length !== 1 || found.kvs[0].create_revision !== guard.createRevision) {
    throw new GuardLostError(guard.key);
  }
}
