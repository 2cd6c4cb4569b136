/**
 * @metropolis/localstorage — a node's on-disk state, declared as a typed tree
 * instead of path strings scattered through the code.
 *
 * What it guarantees:
 * - Every file is written atomically (temporary file, fsync, rename, fsync of
 *   the directory): after a crash a file holds its old or its new content.
 * - Every read validates: a missing file, a file its codec rejects and an
 *   encrypted file that does not verify are distinct, typed errors naming the
 *   file — never garbage data.
 * - The node's private keys are encrypted at rest under NUK XOR CUK, a key no
 *   single party holds; a wrong key is caught at mount time.
 * - Nothing is destroyed or downgraded implicitly: an existing node is never
 *   formatted over, an existing sealed configuration never overwritten, and a
 *   data directory is only mounted under the policy the caller expects.
 *
 * - The ephemeral directory lives in memory only (`placeInMemory()`: a tmpfs
 *   as root, else a private 0700 directory under /dev/shm behind a symlink),
 *   cleared at every start — also of what a killed run left — and released at
 *   a graceful stop: the plain secrets written there never reach a disk.
 *
 * How it fits: `metropolis-node` places the node root and puts the ephemeral
 * directory in memory; the cluster enrolment manager reads the node
 * parameters from the ESP, and then either
 * sets up a new node (`data.mountNew()`, seal the node unlock key into the
 * sealed configuration, hand the cluster unlock key to the cluster) or
 * unseals the configuration and mounts the existing data with both keys.
 * Services (etcd, the curator, workloads) then find their files in the tree.
 *
 * ```
 * <root>/
 * ├── esp/metropolis/        parameters.pb, sealed_configuration.pb, cluster_directory.pb
 * ├── data/                  mountNew() / mountExisting(); marker .metropolis-data.json
 * │   ├── etcd/              peer_pki/{ca.pem, cert.pem, cert-key.pem*}, peer_crl, data/
 * │   ├── node/              credentials/{ca.pem, cert.pem, cert-key.pem*}, roles.pb, cluster_crl.der
 * │   └── workloads/
 * └── ephemeral/             in memory, cleared at every start: consensus/, curator/, workloads/
 *                            (* secret: AES-256-GCM under an encrypted policy)
 * ```
 */
export { atomicWriteFile, type AtomicWriteOptions } from "./atomic-write";
export type { DataPolicy } from "./data-marker";
export { dataDir } from "./data-protection";
export {
  envelopeKeyId,
  hasEnvelopeMagic,
  keyLength as envelopeKeyLength,
  openEnvelope,
  sealEnvelope,
} from "./envelope";
export { defaultMemoryDir, memoryDirPrefix } from "./in-memory-placement";
export {
  FileCorruptedError,
  FileExistsError,
  DataAlreadyInitializedError,
  LocalStorageError,
  SealedCorruptedError,
  WipeIncompleteError,
} from "./errors";
export { ensureMachineKey } from "./machine-key";
export { placeNodeRoot } from "./node-root";
export type { NodeRoot } from "./node-root";
export { protobufCodec, type MessageType } from "./protobuf-codec";
export { sealConfiguration, unsealConfiguration } from "./sealed-configuration";
export type { SealOptions, UnsealOptions } from "./sealed-configuration";
export { dir, File, file, place } from "./tree";
export type { Codec } from "./tree";
export { wipeNodeStorage, type WipeReport } from "./wipe";
