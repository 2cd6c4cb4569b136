/**
 * The keyring's copies follow the cluster's membership: bootstrap makes the
 * keyring and the first member's copy, `addNode` wraps the keyring for the
 * member it adds (before the member starts, so it finds its copy), and
 * `removeNode` deletes the copy of the member it removes.
 */
import type { Namespace } from "etcd3";
import type { ClusterSecrets } from "./cluster-secrets";
import { ConsensusConfigError } from "./errors";
import { keyringCopyKey } from "./keyring-store";
import { wrapKeyring } from "./keyring-wrap";
import { SecretKeyring } from "./secret-keyring";

/**
 * Makes the keyring of a new cluster and stores the first member's copy
 * (only if no copy is there yet), and takes it into `secrets`.
 */
export async function bootstrapKeyring(
  kv: Namespace,
  secrets: ClusterSecrets,
  nodeId: string,
  publicKey: Uint8Array,
): Promise<void> {
  const keyring = SecretKeyring.generate();
  const at = keyringCopyKey(nodeId);
  const result = await kv
    .if(at, "Create", "==", 0)
    .then(kv.put(at).value(wrapKeyring(keyring, publicKey, at)))
    .commit();
  if (!result.succeeded) {
    throw new ConsensusConfigError(
      `consensus: bootstrapping a cluster whose keyring copy ${at} already exists`,
    );
  }
  secrets.apply(keyring, BigInt(result.header.revision));
}

/**
 * Stores member `nodeId`'s copy of the current keyring, wrapped for its raw
 * Ed25519 `publicKey`. Idempotent (a retry wraps again); runs between
 * rotations, never during one.
 */
export function wrapForMember(
  kv: Namespace,
  secrets: ClusterSecrets,
  nodeId: string,
  publicKey: Uint8Array,
): Promise<void> {
  return secrets.exclusive(async () => {
    await secrets.refresh();
    const at = keyringCopyKey(nodeId);
    const keyring = secrets.keyring(`wrap the keyring for ${nodeId}`);
    await kv
      .put(at)
      .value(wrapKeyring(keyring, publicKey, at))
      .exec();
  });
}

/** Deletes member `nodeId`'s copy (nothing when there is none). */
export function dropMemberCopy(
  kv: Namespace,
  secrets: ClusterSecrets,
  nodeId: string,
): Promise<void> {
  return secrets.exclusive(async () => {
    await kv.delete().key(keyringCopyKey(nodeId)).exec();
  });
}
