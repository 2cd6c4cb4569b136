/**
 * Re-sealing every secret of the cluster under the keyring's current key: a
 * paged scan of the whole keyspace, which finds sealed values by their
 * envelope magic (as Kubernetes finds its encrypted values by their prefix),
 * wherever a user of consensus keeps them, so a secret added later needs no
 * registration to be rotated. Each value is replaced by compare-and-swap on
 * the mod revision it was read at, guarded by the caller's {@link WriteGuard};
 * a value that changed meanwhile is read again.
 */
import { Range, type Namespace } from "etcd3";
import { RotationError } from "./errors";
import { guardedSwap, type WriteGuard } from "./guarded-write";
import { sealedKeyId, type SecretKeyring } from "./secret-keyring";

/** Keys per page of the scan. */
const defaultPageSize = 256;
/** Attempts per value before a rotation gives up on it (each failure is someone else's write). */
const swapAttempts = 5;
const zeroKey = Buffer.of(0);

/** One sealed value found by a scan. */
export interface SealedValue {
  readonly key: Buffer;
  readonly value: Buffer;
  readonly keyId: number;
  readonly modRevision: string;
  readonly lease: string;
}

/**
 * Calls `visit` with every sealed value of the keyspace, page by page (each
 * page read at its own revision: values written meanwhile are the writer's
 * business, and a writer seals with the current key).
 */
export async function forEachSealed(
  kv: Namespace,
  visit: (value: SealedValue) => Promise<void>,
  options: { signal?: AbortSignal; pageSize?: number } = {},
): Promise<void> {
  let start = zeroKey;
  for (;;) {
    options.signal?.throwIfAborted();
    const page = await kv
      .getAll()
      .inRange(new Range(start, zeroKey))
      .limit(options.pageSize ?? defaultPageSize)
      .exec();
    for (const found of page.kvs) {
      const keyId = sealedKeyId(found.value);
      if (keyId === undefined) continue;
      await visit({
        key: Buffer.from(found.key),
        value: Buffer.from(found.value),
        keyId,
        modRevision: found.mod_revision,
        lease: found.lease,
      });
    }
    const last = page.kvs.at(-1);
    if (!page.more || last === undefined) return;
    start = Buffer.concat([Buffer.from(last.key), zeroKey]);
  }
}

/** How many sealed values of the keyspace each key id seals. */
export async function sealedKeyUsage(
  kv: Namespace,
  signal?: AbortSignal,
): Promise<Map<number, number>> {
  const usage = new Map<number, number>();
  await forEachSealed(
    kv,
    async ({ keyId }) => {
      usage.set(keyId, (usage.get(keyId) ?? 0) + 1);
    },
    { signal },
  );
  return usage;
}

/**
 * Re-seals under `keyring`'s current key every sealed value of the keyspace
 * that another key sealed. `keyring` must hold every key in use. Returns how
 * many values were re-sealed.
 */
export async function resealAll(
  kv: Namespace,
  keyring: SecretKeyring,
  guard: WriteGuard,
  signal?: AbortSignal,
): Promise<number> {
  let resealed = 0;
  await forEachSealed(
    kv,
    async (found) => {
      if (found.keyId === keyring.currentId) return;
      if (await resealOne(kv, keyring, guard, found)) resealed++;
    },
    { signal },
  );
  return resealed;
}

/** Re-seals one value; false when it was deleted or re-sealed by someone else meanwhile. */
async function resealOne(
  kv: Namespace,
  keyring: SecretKeyring,
  guard: WriteGuard,
  found: SealedValue,
): Promise<boolean> {
  let current: SealedValue | undefined = found;
  for (let attempt = 0; attempt < swapAttempts; attempt++) {
    if (current === undefined || current.keyId === keyring.currentId) return false;
    const plaintext = keyring.open(current.key, current.value);
    const swapped = await guardedSwap(kv, guard, current, keyring.seal(current.key, plaintext));
    if (swapped !== undefined) return true;
    current = await reread(kv, found.key);
  }
  throw new RotationError(
    `${found.key.toString("utf8")} changed under each of ${swapAttempts} attempts to re-seal it; rotate again`,
  );
}

async function reread(kv: Namespace, key: Buffer): Promise<SealedValue | undefined> {
  const found = (await kv.get(key).exec()).kvs[0];
  if (found === undefined) return undefined;
  const keyId = sealedKeyId(found.value);
  if (keyId === undefined) return undefined;
  return {
    key,
    value: Buffer.from(found.value),
    keyId,
    modRevision: found.mod_revision,
    lease: found.lease,
  };
}
