/**
 * Where the curators of a cluster are, as clients dial them: each address
 * bound to the consensus member that serves there, whose certificate is the
 * only one accepted at that address (see curator-client.ts).
 */
import type { common } from "@metropolis/proto";

/** A curator to ask where the leader is. */
export interface CuratorAddress {
  host: string;
  port: number;
  /**
   * The node that runs this curator, a consensus member: its certificate is
   * the only one accepted at this address. Unset only for an address an
   * operator gave (metroctl's `--endpoints`), where any node certificate of
   * the cluster may answer; nodes always know whom they dial.
   */
  nodeId?: string;
}

/** `host:port` of `address` (IPv6 hosts in brackets), for dialling, logs and errors. */
export function formatCuratorAddress({
  host,
  port,
}: Pick<CuratorAddress, "host" | "port">): string {
  return `${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/**
 * The curators of a cluster directory: every address of its consensus
 * members, each bound to its node, at the cluster's curator `port`. Nodes
 * that are not consensus members run no curator and are never asked.
 */
export function directoryCurators(
  directory: common.ClusterDirectory,
  port: number,
): CuratorAddress[] {
  return directory.nodes
    .filter((node) => node.consensusMember)
    .flatMap((node) => node.addresses.map((a) => ({ host: a.host, port, nodeId: node.id })));
}

/**
 * `directory` as nodes keep it on their ESP (`esp/metropolis/cluster_directory.pb`,
 * roleserve's directory worker) and `metroctl cluster directory` writes it:
 * only the nodes with an address (one without cannot be dialled), sorted by
 * ID, so that the same cluster always encodes to the same bytes.
 */
export function dialableDirectory(directory: common.ClusterDirectory): common.ClusterDirectory {
  const nodes = directory.nodes.filter((node) => node.addresses.some((a) => a.host !== ""));
  nodes.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { nodes };
}
