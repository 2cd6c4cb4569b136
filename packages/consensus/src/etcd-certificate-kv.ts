/**
 * etcd as pki's `CertificateKv`: the storage a `CertificateStore` keeps its
 * certificates in. pki defines the port and does not know etcd; consensus,
 * which owns etcd, adapts it here. It passes pki's `certificateKvContract`
 * (test/etcd-certificate-kv.test.ts), as the in-memory adapter pki's own
 * tests use does.
 *
 * How each call maps onto etcd, every one a single transaction:
 * - `read`: {@link readAtOneRevision}, the same reads in both branches of a
 *   transaction, so all keys are read at one revision;
 * - `createAll`: puts if every guarded key has create_revision == 0;
 * - `replace`: a put if the key's mod_revision is still the one read (a
 *   key's revision is its mod_revision).
 *
 * The kv's own `if` starts each transaction, so a kv whose `if` adds a
 * comparison of its own (the curator leader's, which refuses a deposed
 * leader's writes) guards every write of the store with it.
 */
import type { Namespace } from "etcd3";
import type { CertificateKv, KvPut, SomeKeys, StoredValue } from "@metropolis/pki";
import { readAtOneRevision } from "./atomic-read";

/**
 * The part of an etcd3 client the adapter uses. `Etcd3`, a `Namespace`
 * (keys relative to its prefix) and a wrapper whose `if` adds a guard all
 * satisfy it.
 */
export type EtcdTransactions = Pick<Namespace, "get" | "put" | "if">;

/** etcd, through `kv`, as the storage of a `CertificateStore`. */
export function etcdCertificateKv(kv: EtcdTransactions): CertificateKv {
  return {
    async read(keys: SomeKeys): Promise<Array<StoredValue | null>> {
      return (await readAtOneRevision(kv, keys)).map((found) =>
        found === undefined
          ? null
          : { value: Buffer.from(found.value), revision: found.mod_revision },
      );
    },

    async createAll(absent: SomeKeys, puts: readonly KvPut[]): Promise<boolean> {
      let txn = kv.if(absent[0], "Create", "==", 0);
      for (const key of absent.slice(1)) txn = txn.and(key, "Create", "==", 0);
      const result = await txn
        .then(...puts.map(([key, value]) => kv.put(key).value(value)))
        .commit();
      return result.succeeded;
    },

    async replace(key: string, revision: string, value: Buffer): Promise<boolean> {
      const result = await kv
        .if(key, "Mod", "==", revision)
        .then(kv.put(key).value(value))
        .commit();
      return result.succeeded;
    },
  };
}
