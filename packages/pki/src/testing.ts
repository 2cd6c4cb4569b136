/**
 * @metropolis/pki/testing — for tests of pki and of the packages that
 * implement its ports: an in-memory `CertificateKv` and the contract
 * every implementation of it must pass; and `runUnderGcStress`, for tests
 * that code using Node's key objects does not hang under garbage
 * collection (see generateDerKeyPair).
 */
export { MemoryCertificateKv } from "./memory-certificate-kv";
export { certificateKvContract } from "./certificate-kv-contract";
export type { CertificateKvCheck, OpenCertificateKv } from "./certificate-kv-contract";
export { runUnderGcStress } from "./gc-stress";
export type { GcStressOutcome } from "./gc-stress";
