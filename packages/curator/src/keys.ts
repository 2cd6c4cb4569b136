/**
 * The curator's etcd key layout, inside the `namespaced:curator/` namespace.
 * The curator is the only writer of these keys.
 *
 *   /leader/<lease>            election keys (value: LeaderElectionValue)
 *   /nodes/<id>                node records (value: private.Node)
 *   /node_secrets/<id>/…       a node's secrets: cluster_unlock_key (sealed)
 *   /node_addresses/<ip>       external address → the node id holding it
 *   /join_keys/<hex pubkey>    join key → node id
 *   /global/register_ticket    the register ticket (RegisterTicket)
 *   /global/initial_owner      the owner's public key (InitialOwner)
 *   /cluster/configuration     the cluster configuration (common.ClusterConfiguration)
 *   /cluster-pki/…             the cluster CA and issued certificates (@metropolis/pki)
 */
export const leaderPrefix = "/leader/";
export const nodesPrefix = "/nodes/";
/** End of the `/nodes/` range (etcd range end: the prefix with its last byte incremented). */
export const nodesRangeEnd = "/nodes0";
export const registerTicketKey = "/global/register_ticket";
export const initialOwnerKey = "/global/initial_owner";
export const clusterConfigurationKey = "/cluster/configuration";
export const clusterPkiPrefix = "/cluster-pki/";
/** Name of the cluster CA in the cluster PKI store. */
export const clusterCaName = "cluster-ca";

export function nodeKey(nodeId: string): string {
  return `${nodesPrefix}${nodeId}`;
}

/** Where node `nodeId`'s cluster unlock key is kept: apart from its record, which nodes may watch. */
export function clusterUnlockKeyKey(nodeId: string): string {
  return `/node_secrets/${nodeId}/cluster_unlock_key`;
}

/** The record of who holds external address `address` (canonical text, see node-addresses.ts). */
export function nodeAddressKey(address: string): string {
  return `/node_addresses/${address}`;
}

export function joinKeyKey(joinPublicKey: Uint8Array): string {
  return `/join_keys/${Buffer.from(joinPublicKey).toString("hex")}`;
}
