/**
 * Reading several etcd keys at one revision. etcd has no multi-key get, but
 * a transaction is atomic: with the same reads in both branches, whichever
 * branch runs returns a consistent snapshot. Two plain gets could straddle
 * another writer's commit and see a state that never existed (a certificate
 * without its key, half of a bootstrap's records).
 */
import type { IKeyValue, Namespace } from "etcd3";

/**
 * The key-values of `keys` (undefined for an absent key), in their order,
 * all read at one revision. `kv`'s own `if` runs the transaction, so a kv
 * that adds a guard there reads just the same whether the guard holds or not.
 */
export async function readAtOneRevision(
  kv: Pick<Namespace, "get" | "if">,
  keys: readonly string[],
): Promise<Array<IKeyValue | undefined>> {
  const [first] = keys;
  if (first === undefined) return [];
  const reads = () => keys.map((key) => kv.get(key));
  const result = await kv
    .if(first, "Create", "==", 0)
    .then(...reads())
    .else(...reads())
    .commit();
  return result.responses.map((response) => response.response_range.kvs[0]);
}
