/**
 * Sealing of the node's configuration on the ESP. On Monogon the sealed
 * configuration (which holds the node unlock key) is sealed to the TPM; here,
 * without one, it is encrypted and authenticated with AES-256-GCM under the
 * machine key, which is kept off the ESP (see machine-key.ts). The payload is
 * opaque bytes: the caller serialises its `SealedConfiguration` message.
 */
import { openEnvelope, sealEnvelope } from "./envelope";
import { FileExistsError, SealedConfigurationExistsError, SealedCorruptedError } from "./errors";
import { loadMachineKey, loadOrCreateMachineKey } from "./machine-key";
import type { File } from "./tree";

/** Options of {@link sealConfiguration}. */
export interface SealOptions {
  /** Path of the machine key, outside the ESP; created on first use. */
  readonly machineKeyPath: string;
  /**
   * Replace an existing sealed configuration. Without it, an existing one is
   * kept and {@link SealedConfigurationExistsError} is thrown: it may hold the
   * only copy of the node unlock key, so replacing it must be deliberate.
   */
  readonly overwrite?: boolean;
}

/** Options of {@link unsealConfiguration}. */
export interface UnsealOptions {
  /** Path of the machine key the configuration was sealed with. */
  readonly machineKeyPath: string;
}

const magic = "MTSC";
const associatedData = "metropolis-ts sealed configuration";

/** Seals `configuration` into `file` (atomically, mode 0600) under the machine key. */
export async function sealConfiguration(
  file: File<Buffer>,
  configuration: Uint8Array,
  options: SealOptions,
): Promise<void> {
  const key = await loadOrCreateMachineKey(options.machineKeyPath);
  const sealed = sealEnvelope(key, magic, associatedData, configuration);
  try {
    await file.write(sealed, { mode: 0o600, exclusive: !options.overwrite });
  } catch (error) {
    if (error instanceof FileExistsError) {
      throw new SealedConfigurationExistsError(file.fullPath);
    }
    throw error;
  }
}

/**
 * Unseals the configuration in `file`. A missing file is `FileMissingError`;
 * one that is corrupt, or was sealed on another machine (no machine key here,
 * or a different one), is {@link SealedCorruptedError}.
 */
export async function unsealConfiguration(
  file: File<Buffer>,
  options: UnsealOptions,
): Promise<Buffer> {
  const sealed = await file.read();
  const key = await loadMachineKey(options.machineKeyPath);
  if (key === undefined) {
    throw new SealedCorruptedError(
      file.fullPath,
      `there is no machine key at ${options.machineKeyPath}, so it was sealed on another machine (or this machine's key was lost)`,
    );
  }
  const opened = openEnvelope(key, magic, associatedData, sealed);
  if (!opened.ok) {
    throw new SealedCorruptedError(
      file.fullPath,
      `${opened.reason}; if it is intact, it was sealed on another machine`,
    );
  }
  return opened.plaintext;
}
