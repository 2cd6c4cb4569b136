/**
 * Namespaced etcd clients. Every user of the cluster's etcd (the curator, the
 * Kubernetes PKI, workloads) gets a client confined to its own key prefix, so
 * that no subsystem can read or clobber another's keys by accident:
 *
 *   root.sub("curator")              → keys under "namespaced:curator/"
 *   root.sub("curator").sub("pki")   → keys under "namespaced:curator:pki/"
 */
import type { Etcd3, Namespace } from "etcd3";
import { InvalidNamespaceError } from "./errors";

export class ConsensusClient {
  /** The etcd3 handle for this client's prefix: get/put/delete/if/watch/lease/election. */
  readonly kv: Namespace;
  /** The key prefix every key of `kv` lives under (empty for the root client). */
  readonly prefix: string;

  private constructor(
    private readonly etcd: Etcd3,
    readonly path: readonly string[],
  ) {
    this.prefix = path.length === 0 ? "" : `namespaced:${path.join(":")}/`;
    this.kv = etcd.namespace(this.prefix);
  }

  /** The unconfined client over a whole etcd cluster. Only the consensus service holds one. */
  static root(etcd: Etcd3): ConsensusClient {
    return new ConsensusClient(etcd, []);
  }

  /** A client confined to the sub-namespace `segment` of this one. */
  sub(segment: string): ConsensusClient {
    if (typeof segment !== "string" || segment === "" || /[:/]/.test(segment)) {
      throw new InvalidNamespaceError(segment);
    }
    return new ConsensusClient(this.etcd, [...this.path, segment]);
  }
}
