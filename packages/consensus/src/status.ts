/**
 * The consensus service's status, published as an event value: other
 * services wait for `running` and then use the client it carries.
 */
import type { IMember } from "etcd3";
import type { ConsensusClient } from "./consensus-client";
import type { EtcdPeer } from "./etcd-flags";

/** What a new member needs to join the cluster: returned by `addNode()`, given to its consensus service. */
export interface JoinCluster {
  /** Every member of the cluster, the new one included, as etcd's initial cluster. */
  peers: EtcdPeer[];
  /** The etcd CA certificate (DER). */
  caCertificate: Uint8Array;
  /** The new member's peer certificate (DER), for its own Ed25519 key. */
  certificate: Uint8Array;
}

/** Where a member can be reached by its peers. */
export interface PeerAddress {
  host: string;
  /** Default 7834. */
  port?: number;
}

export type ConsensusStatus =
  | { state: "stopped" }
  | {
      state: "running";
      /** The unconfined client; hand out `client.sub(user)` to users. */
      client: ConsensusClient;
      /**
       * Adds the node `nodeId`, whose raw 32-byte Ed25519 public key is `publicKey`, as a
       * learner reachable at `address`, and returns what it needs to join.
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
       * Removes the node's member, if it has one. Give the node's peer
       * `address` to also remove a learner that was added but never started.
       */
      removeNode(nodeId: string, address?: PeerAddress, signal?: AbortSignal): Promise<boolean>;
    };
