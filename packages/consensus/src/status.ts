/**
 * The consensus service's status, published as an event value: other
 * services wait for `running` and then use the client it carries.
 */
import type { IMember } from "etcd3";
import type { ConsensusClient } from "./consensus-client";
import type { EtcdPeer } from "./etcd-flags";
import type { WriteGuard } from "./guarded-write";
import type { RaftStatus } from "./raft-status";
import type { RotationResult } from "./rotation";

/** What a new member needs to join the cluster: returned by `addNode()`, given to its consensus service. */
export interface JoinCluster {
  /** Every member of the cluster, the new one included, as etcd's initial cluster. */
  peers: EtcdPeer[];
  /** The etcd CA certificate (DER). */
  caCertificate: Uint8Array;
  /** The new member's peer certificate (DER), for its own Ed25519 key. */
  certificate: Uint8Array;
  /**
   * The etcd CA's revocation list (DER), so that the member refuses revoked
   * peers from its first start; empty when unknown (it then follows the one in
   * etcd once it serves, and uses it from its next start).
   */
  crl: Uint8Array;
}

/** Where a member can be reached by its peers. */
export interface PeerAddress {
  host: string;
  /** Default 7834. */
  port?: number;
}

export type ConsensusStatus =
  | { state: "stopped" }
  /**
   * etcd itself reported that its cluster removed this member (see
   * etcd-log.ts): its data will never be part of the cluster again and may be
   * deleted. Final for this service: it does not start etcd again.
   */
  | { state: "removed" }
  | {
      state: "running";
      /**
       * The unconfined client; hand out `client.sub(user)` to users. Its
       * sealers (`client.sub(user).secrets`) use this member's keyring, which
       * is loaded whenever the state is `running`.
       */
      client: ConsensusClient;
      /**
       * The member's unix client socket (absolute path), for this node's
       * own processes; etcd serves its Prometheus /metrics there too.
       */
      clientSocket: string;
      /**
       * Adds the node `nodeId`, whose raw 32-byte Ed25519 public key is `publicKey`, as a
       * learner reachable at `address`, and returns what it needs to join. It
       * first stores the cluster secrets keyring wrapped for that key, which
       * the new member loads once it runs.
       * Idempotent for the same node and address.
       */
      addNode(
        nodeId: string,
        publicKey: Uint8Array,
        address: PeerAddress,
        signal?: AbortSignal,
      ): Promise<JoinCluster>;
      /** The cluster's members, learners included (a member not started yet has an empty name). */
      members(): Promise<IMember[]>;
      /**
       * Whether this member still belongs to its cluster, read with quorum:
       * a linearizable read first (so that every membership change committed
       * before it has been applied here), then the member list. Rejects when
       * the cluster does not answer with quorum within `timeoutMs` (default
       * 5 s): then nothing is known, and nothing should be concluded.
       */
      confirmMember(timeoutMs?: number): Promise<boolean>;
      /**
       * The raft state as this member sees it (raft-status.ts): the raft
       * leader's member ID and the term, and the peers this member has a raft
       * connection with. Rejects with RaftStatusError when the member does not
       * answer within `timeoutMs` (default 2 s).
       */
      raftStatus(timeoutMs?: number): Promise<RaftStatus>;
      /**
       * Removes the node's member, if it has one, and its copy of the keyring.
       * Give the node's peer `address` to also remove a learner that was
       * added but never started.
       */
      removeNode(nodeId: string, address?: PeerAddress, signal?: AbortSignal): Promise<boolean>;
      /**
       * Revokes every etcd peer certificate issued for the node (its deletion
       * from the cluster): no member lets it into raft again. Returns how many.
       */
      revokeNode(nodeId: string): Promise<number>;
      /**
       * Rotates the cluster secrets key (rotation.ts): a new key, wrapped for
       * every member, re-seals every secret in etcd, and the older keys are
       * retired. Every write is guarded by `guard` (the curator leader's
       * election key).
       */
      rotateSecretsKey(guard: WriteGuard, signal?: AbortSignal): Promise<RotationResult>;
      /**
       * The member's current cluster secrets keyring wrapped for the raw
       * Ed25519 public key `recipientPublicKey` with the associated data `at`
       * (keyring-wrap.ts): an encoded `priv.WrappedSecretKeyring`. A backup
       * carries the keyring so, sealed to the owner's key.
       */
      wrapKeyringFor(recipientPublicKey: Uint8Array, at: string): Buffer;
    };
