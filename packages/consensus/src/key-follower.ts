/**
 * Following one etcd key from this member's own data: what a member keeps
 * in step with the cluster (its wrapped keyring, the etcd CA's revocation
 * list) while it may still be a learner.
 *
 * etcd 3.4 serves a learner only serializable reads and no watches (checked:
 * a linearizable read fails with "rpc not supported for learner", a watch is
 * never created). So the follower polls with serializable reads while the
 * key is missing or its member is a learner, and watches the key once the
 * member votes; a failed watch reads again.
 */
import type { Etcd3, Namespace } from "etcd3";
import { abortable, abortableSleep } from "@metropolis/supervisor";

export interface FollowKeyOptions {
  /** The member's own etcd client. */
  readonly client: Etcd3;
  /** The full etcd key. */
  readonly key: string;
  /**
   * Called with the value now and with every later put (its mod revision
   * too). A throw ends the following with that error.
   */
  take(value: Buffer, modRevision: string): void | Promise<void>;
  /** Called once, after the first value was taken. */
  onFirst?(): void;
  /** Called once, when the key is missing at the first read. */
  onMissing?(): void;
  /** Told about a delete of the key (the value taken last stays in force). */
  onDelete?(): void;
  /** Poll interval while the key is missing or the member is a learner. Default 250 ms. */
  readonly pollIntervalMs?: number;
}

/** Follows `options.key` until `signal` aborts (then rejects with its reason). */
export async function followKey(options: FollowKeyOptions, signal: AbortSignal): Promise<never> {
  const { client, key } = options;
  const kv: Namespace = client.namespace("");
  const pollIntervalMs = options.pollIntervalMs ?? 250;
  let first = true;
  let missingSaid = false;
  for (;;) {
    signal.throwIfAborted();
    // etcd calls do not take a signal, and one on a member that is stopping can
    // wait for a reconnect that never comes: the follower stops anyway.
    const res = await abortable(kv.get(key).serializable(true).exec(), signal);
    const found = res.kvs[0];
    if (found === undefined) {
      if (!missingSaid) {
        missingSaid = true;
        options.onMissing?.();
      }
      await abortableSleep(pollIntervalMs, signal);
      continue;
    }
    await options.take(Buffer.from(found.value), found.mod_revision);
    if (first) {
      first = false;
      options.onFirst?.();
    }
    if ((await abortable(client.maintenance.status(), signal)).isLearner) {
      await abortableSleep(pollIntervalMs, signal);
      continue;
    }
    await watchKey(kv, key, found.mod_revision, options, signal);
  }
}

/**
 * Watches `key` from after `modRevision`, taking every put, until `signal`
 * aborts (rejects with its reason) or the watch fails (resolves: the caller
 * reads again).
 */
async function watchKey(
  kv: Namespace,
  key: string,
  modRevision: string,
  options: FollowKeyOptions,
  signal: AbortSignal,
): Promise<void> {
  // watcher() rather than create(): the watch exists (and is cancelled below)
  // from this line on. create() resolves only once etcd answered, and a watch
  // created after the signal aborted would never be cancelled: etcd3 keeps
  // reconnecting a forgotten watch for ever (a timer that keeps the process
  // alive after the member stopped).
  const watcher = kv
    .watch()
    .key(key)
    .startRevision(String(BigInt(modRevision) + 1n))
    .watcher();
  let stop = () => undefined as void;
  const onAbort = () => stop();
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    await new Promise<void>((resolve, reject) => {
      stop = () => reject(signal.reason);
      if (signal.aborted) return reject(signal.reason);
      watcher.on("put", (found) => {
        Promise.resolve(options.take(Buffer.from(found.value), found.mod_revision)).catch(reject);
      });
      watcher.on("delete", () => options.onDelete?.());
      // etcd cancelled the watch, or the stream broke: the caller reads again
      // (etcd3's own resume could skip events of a watch still catching up).
      watcher.on("error", () => resolve());
      watcher.on("disconnected", () => resolve());
    });
  } finally {
    signal.removeEventListener("abort", onAbort);
    // Not awaited: cancelling on a member that stopped can wait for a reconnect.
    void watcher.cancel().catch(() => undefined);
  }
}
