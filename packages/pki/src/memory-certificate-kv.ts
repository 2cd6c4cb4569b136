/**
 * A {@link CertificateKv} in memory, for pki's own tests: certificate stores
 * exercised without starting etcd. It keeps the port's guarantees (it passes
 * `certificateKvContract`, as etcd does): each call runs to completion before
 * another touches the map, so reads are snapshots and compare-and-swaps are
 * atomic; every write takes the next value of one counter as its revision,
 * as etcd's mod_revision does.
 *
 * Outside the port, `keys`, `get`, `set` and `delete` let a test look at and
 * tamper with what is stored, the way a test against etcd uses a raw client.
 */
import type { CertificateKv, KvPut, SomeKeys, StoredValue } from "./certificate-kv";

/** An in-memory {@link CertificateKv}; several stores (or "nodes") may share one. */
export class MemoryCertificateKv implements CertificateKv {
  readonly #values = new Map<string, StoredValue>();
  #revision = 0;

  async read(keys: SomeKeys): Promise<Array<StoredValue | null>> {
    return keys.map((key) => {
      const stored = this.#values.get(key);
      return stored === undefined
        ? null
        : { value: Buffer.from(stored.value), revision: stored.revision };
    });
  }

  async createAll(absent: SomeKeys, puts: readonly KvPut[]): Promise<boolean> {
    if (absent.some((key) => this.#values.has(key))) return false;
    this.#write(puts);
    return true;
  }

  async replace(key: string, revision: string, value: Buffer): Promise<boolean> {
    if (this.#values.get(key)?.revision !== revision) return false;
    this.#write([[key, value]]);
    return true;
  }

  /** Every key stored, sorted. */
  keys(): string[] {
    return [...this.#values.keys()].sort();
  }

  /** The value at `key` (a copy), or null. */
  get(key: string): Buffer | null {
    const stored = this.#values.get(key);
    return stored === undefined ? null : Buffer.from(stored.value);
  }

  /** Writes `value` at `key` unconditionally, as a raw etcd put would. */
  set(key: string, value: Uint8Array): void {
    this.#write([[key, Buffer.from(value)]]);
  }

  /** Deletes `key`, and every key starting with it when `prefix` is true. */
  delete(key: string, { prefix = false }: { prefix?: boolean } = {}): void {
    for (const stored of [...this.#values.keys()]) {
      if (stored === key || (prefix && stored.startsWith(key))) this.#values.delete(stored);
    }
  }

  /** One write of several keys: they share a revision, as in an etcd transaction. */
  #write(puts: readonly KvPut[]): void {
    const revision = String(++this.#revision);
    for (const [key, value] of puts) this.#values.set(key, { value: Buffer.from(value), revision });
  }
}
