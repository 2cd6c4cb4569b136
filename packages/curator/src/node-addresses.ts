/**
 * Who holds which external address. A node reports its address itself
 * (UpdateNodeStatus), and other nodes dial what it reports: etcd peers, the
 * curators a node asks for the leader, the directory a node finds its
 * cluster by after a reboot. So an address is held by one node at a time,
 * recorded as `/node_addresses/<address>` → node ID and written in the same
 * guarded transaction as the status that claims it: a node cannot take
 * over an address another node holds, not even by racing it.
 */
import { isIPv6 } from "node:net";
import type { Namespace } from "etcd3";
import { AlreadyExistsError } from "./errors";
import { nodeAddressKey } from "./keys";
import type { Txn } from "./leadership";

/**
 * The canonical text of an IP address, so that one address has one key
 * (`::1` and `0:0::1` are the same IPv6 address). `address` must be an IP.
 */
export function canonicalAddress(address: string): string {
  // The WHATWG URL parser serialises IPv6 hosts canonically (RFC 5952).
  return isIPv6(address) ? new URL(`http://[${address}]/`).hostname.slice(1, -1) : address;
}

/**
 * Adds to `txn` what claiming `address` for `nodeId` needs: the comparison
 * that nobody else took it meanwhile, and the writes that record the claim
 * and release `previous` (the address the node held before, if another).
 * Throws AlreadyExistsError when another node holds `address` now.
 */
export async function claimAddress(
  kv: Namespace,
  txn: Txn,
  nodeId: string,
  address: string,
  previous: string | undefined,
): Promise<Array<ReturnType<Namespace["put"]> | ReturnType<Namespace["delete"]>>> {
  const key = nodeAddressKey(canonicalAddress(address));
  const res = await kv.get(key).exec();
  const holder = res.kvs[0];
  if (holder && holder.value.toString() !== nodeId) {
    throw new AlreadyExistsError(
      `external address ${address} is held by node ${holder.value.toString()}; a node may only report an address no other node holds`,
    );
  }
  const ops: Array<ReturnType<Namespace["put"]> | ReturnType<Namespace["delete"]>> = [];
  if (holder) {
    txn.and(key, "Mod", "==", holder.mod_revision);
  } else {
    txn.and(key, "Create", "==", 0);
    ops.push(kv.put(key).value(nodeId));
  }
  if (previous !== undefined && canonicalAddress(previous) !== canonicalAddress(address)) {
    ops.push(...(await releaseAddress(kv, txn, nodeId, previous)));
  }
  return ops;
}

/**
 * Adds to `txn` the release of `address` by `nodeId` (a node deleted, or
 * moving to another address): the delete of its record, guarded so that only
 * the node's own claim goes. Nothing when the node does not hold it.
 */
export async function releaseAddress(
  kv: Namespace,
  txn: Txn,
  nodeId: string,
  address: string,
): Promise<Array<ReturnType<Namespace["delete"]>>> {
  const key = nodeAddressKey(canonicalAddress(address));
  const res = await kv.get(key).exec();
  const holder = res.kvs[0];
  if (!holder || holder.value.toString() !== nodeId) return [];
  txn.and(key, "Mod", "==", holder.mod_revision);
  return [kv.delete().key(key)];
}
