/**
 * Rotation of the cluster secrets key. Every step leaves every secret
 * openable by every member, so a crash anywhere leaves a working cluster, and
 * the next rotation finishes the job:
 *
 * 1. A fresh key joins the keyring, not sealing yet, and every member's
 *    wrapped copy is rewritten with it. Afterwards every member can open what
 *    the new key seals.
 * 2. The new key becomes current in every copy (and in this member's memory).
 *    From here on new secrets are sealed under it.
 * 3. Every sealed value of the keyspace under another key is re-sealed under
 *    the new one (reseal.ts), each write a compare-and-swap on the value.
 * 4. A scan checks that no value uses an older key any more; then the older
 *    keys are retired: every copy is rewritten without them.
 *
 * A crash between steps leaves copies that hold every key some value uses:
 * before 2 no value uses the new key; between 2 and 4 every copy holds both;
 * during 4 every value uses the new key, which every copy holds. A second
 * rotation starts from whatever keyring this member holds (all keys still in
 * use), adds its own key, re-seals everything under it and retires the rest.
 *
 * Every write is guarded by the caller's {@link WriteGuard} (the curator
 * leader's election key), so a leader that lost its lease stops at its next
 * write. Rotation and wrapping the keyring for a new member run one at a time
 * on this member (ClusterSecrets.exclusive); other members do neither.
 */
import type { Namespace } from "etcd3";
import type { Logger } from "@metropolis/supervisor";
import type { ClusterSecrets } from "./cluster-secrets";
import { RotationError } from "./errors";
import { guardedSwap, type WriteGuard } from "./guarded-write";
import { keyringCopyKey, listCopies, type StoredCopy } from "./keyring-store";
import { wrapKeyring } from "./keyring-wrap";
import { resealAll, sealedKeyUsage } from "./reseal";
import type { SecretKeyring } from "./secret-keyring";

/** What a rotation did. */
export interface RotationResult {
  /** The id of the new key, which now seals every secret. */
  readonly keyId: number;
  /** The ids of the keys retired, ascending. */
  readonly retiredKeyIds: number[];
  /** How many sealed values were re-sealed under the new key. */
  readonly resealed: number;
}

export interface RotationContext {
  /** The root kv (full keys). */
  readonly kv: Namespace;
  /** This member's keyring. */
  readonly secrets: ClusterSecrets;
  /** This member's node ID: its own copy is rewritten like the others. */
  readonly nodeId: string;
  readonly logger: Logger;
}

/** Rewrites of a copy that changed meanwhile before a rotation gives up. */
const rewrapAttempts = 5;

/** Rotates the cluster secrets key; see the module comment. */
export function rotateSecretsKey(
  ctx: RotationContext,
  guard: WriteGuard,
  signal?: AbortSignal,
): Promise<RotationResult> {
  return ctx.secrets.exclusive(async () => {
    await ctx.secrets.refresh();
    const started = Date.now();
    const before = ctx.secrets.keyring("rotate the cluster secrets key");
    const { keyring: added, id } = before.withNewKey();
    await rewrapEvery(ctx, added, guard, signal);
    ctx.logger.info(`cluster secrets key ${id} added to every member's keyring`);

    const current = added.withCurrent(id);
    await rewrapEvery(ctx, current, guard, signal);
    ctx.logger.info(`cluster secrets key ${id} is current on every member`);

    const resealed = await resealAll(ctx.kv, current, guard, signal);
    const usage = await sealedKeyUsage(ctx.kv, signal);
    const stale = [...usage].filter(([keyId]) => keyId !== id);
    if (stale.length > 0) {
      // Only a writer holding an older keyring can have done this (a stale
      // leader); the keys it used stay, and the next rotation retires them.
      throw new RotationError(
        `values are still sealed under older keys after re-sealing (${stale
          .map(([keyId, count]) => `${count} under key ${keyId}`)
          .join(", ")}); nothing was retired, rotate again`,
      );
    }
    const unknown = [...usage.keys()].filter((keyId) => !current.has(keyId));
    if (unknown.length > 0) {
      throw new RotationError(`values are sealed under unknown key ids ${unknown.join(", ")}`);
    }

    const retiredKeyIds = current.ids.filter((keyId) => keyId !== id);
    await rewrapEvery(ctx, current.without(retiredKeyIds), guard, signal);
    ctx.logger.info(
      `cluster secrets key rotated to ${id} in ${Date.now() - started} ms: ${resealed} secrets re-sealed, keys ${retiredKeyIds.join(", ") || "none"} retired`,
    );
    return { keyId: id, retiredKeyIds, resealed };
  });
}

/**
 * Rewrites every member's copy with `keyring`, and takes it as this member's
 * keyring once all are written (at the revision of the last write, so the
 * follower does not bring back an older copy).
 */
async function rewrapEvery(
  ctx: RotationContext,
  keyring: SecretKeyring,
  guard: WriteGuard,
  signal?: AbortSignal,
): Promise<void> {
  const copies = await listCopies(ctx.kv);
  if (!copies.some((copy) => copy.nodeId === ctx.nodeId)) {
    throw new RotationError(
      `this member (${ctx.nodeId}) has no keyring copy at ${keyringCopyKey(ctx.nodeId)}`,
    );
  }
  let revision = 0n;
  for (const copy of copies) {
    signal?.throwIfAborted();
    const written = await rewrap(ctx.kv, keyring, guard, copy);
    if (written !== undefined && written > revision) revision = written;
  }
  ctx.secrets.apply(keyring, revision);
}

/** Rewrites one copy; undefined when the member's copy was deleted meanwhile (it left). */
async function rewrap(
  kv: Namespace,
  keyring: SecretKeyring,
  guard: WriteGuard,
  copy: StoredCopy,
): Promise<bigint | undefined> {
  let current: StoredCopy | undefined = copy;
  for (let attempt = 0; attempt < rewrapAttempts; attempt++) {
    if (current === undefined) return undefined;
    const wrapped = wrapKeyring(keyring, current.recipientPublicKey, current.key);
    const written = await guardedSwap(kv, guard, current, wrapped);
    if (written !== undefined) return written;
    current = (await listCopies(kv)).find((c) => c.nodeId === copy.nodeId);
  }
  throw new RotationError(
    `keyring copy ${copy.key} changed under each of ${rewrapAttempts} attempts to rewrite it; rotate again`,
  );
}
