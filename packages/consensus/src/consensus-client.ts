/**
 * Namespaced etcd clients. Every user of the cluster's etcd (the curator, the
 * Kubernetes PKI, workloads) gets a client confined to its own key prefix, so
 * that no subsystem can read or clobber another's keys by accident:
 *
 *   root.sub("curator")              → keys under "namespaced:curator/"
 *   root.sub("curator").sub("pki")   → keys under "namespaced:curator:pki/"
 *
 * Each client also carries the sealer of its namespace (`secrets`): secrets
 * a user keeps in etcd are sealed with the cluster secrets keyring, with the
 * full etcd key as associated data (cluster-secrets.ts).
 */
import type { Etcd3, Namespace } from "etcd3";
import type { SecretSealer } from "@metropolis/pki";
import { unloadedSealer, type ClusterSecrets } from "./cluster-secrets";
import { InvalidNamespaceError } from "./errors";

export class ConsensusClient {
  /** The etcd3 handle for this client's prefix: get/put/delete/if/watch/lease/election. */
  readonly kv: Namespace;
  /** The key prefix every key of `kv` lives under (empty for the root client). */
  readonly prefix: string;
  /**
   * Seals and opens secrets stored under this client's prefix (keys relative
   * to `kv`), with the member's cluster secrets keyring. Hand it to a
   * `CertificateStore` used with `kv`.
   */
  readonly secrets: SecretSealer;

  private constructor(
    private readonly etcd: Etcd3,
    readonly path: readonly string[],
    private readonly keyring: ClusterSecrets | undefined,
  ) {
    this.prefix = path.length === 0 ? "" : `namespaced:${path.join(":")}/`;
    this.kv = etcd.namespace(this.prefix);
    this.secrets = keyring?.sealer(this.prefix) ?? unloadedSealer(this.prefix);
  }

  /**
   * The unconfined client over a whole etcd cluster. Only the consensus
   * service holds one, with its member's keyring; made without one (tools,
   * tests), its sealers refuse with KeyringNotLoadedError.
   */
  static root(etcd: Etcd3, keyring?: ClusterSecrets): ConsensusClient {
    return new ConsensusClient(etcd, [], keyring);
  }

  /**
   * This client's namespace and sealer over another connection to the same
   * cluster (e.g. a dedicated one, see `memberClient`); whoever made `etcd`
   * closes it.
   */
  over(etcd: Etcd3): ConsensusClient {
    return new ConsensusClient(etcd, this.path, this.keyring);
  }

  /** A client confined to the sub-namespace `segment` of this one. */
  sub(segment: string): ConsensusClient {
    if (typeof segment !== "string" || segment === "" || /[:/]/.test(segment)) {
      throw new InvalidNamespaceError(segment);
    }
    return new ConsensusClient(this.etcd, [...this.path, segment], this.keyring);
  }
}
