/**
 * The machine key: what stands in for a TPM when sealing the node's
 * configuration. It lives outside the ESP, on the machine, so that a copy of
 * the ESP alone — a lost USB stick, an image pulled off a cloud volume — does
 * not reveal the sealed configuration (and with it the node unlock key).
 */
import { randomBytes } from "node:crypto";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { atomicWriteFile } from "./atomic-write";
import { keyLength } from "./envelope";
import { FileCorruptedError, FileExistsError } from "./errors";

/**
 * Reads the machine key at `keyPath`; undefined if there is none. A file of
 * the wrong size is {@link FileCorruptedError}: using it would seal under a key
 * that is not the one the file once held.
 */
export async function loadMachineKey(keyPath: string): Promise<Buffer | undefined> {
  let key: Buffer;
  try {
    key = await fs.readFile(keyPath);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      return undefined;
    }
    throw error;
  }
  if (key.length !== keyLength) {
    throw new FileCorruptedError(
      keyPath,
      `a machine key is ${keyLength} bytes, this file has ${key.length}`,
    );
  }
  return key;
}

/**
 * Reads the machine key at `keyPath`, creating it (random, mode 0600, in a
 * directory created 0700 if missing) on first use.
 */
export async function loadOrCreateMachineKey(keyPath: string): Promise<Buffer> {
  const existing = await loadMachineKey(keyPath);
  if (existing !== undefined) {
    return existing;
  }
  await fs.mkdir(path.dirname(keyPath), { recursive: true, mode: 0o700 });
  const key = randomBytes(keyLength);
  try {
    // Exclusive, so that of two first uses racing, one key wins and both seal with it.
    await atomicWriteFile(keyPath, key, { mode: 0o600, exclusive: true });
  } catch (error) {
    if (error instanceof FileExistsError) {
      return loadOrCreateMachineKey(keyPath);
    }
    throw error;
  }
  return key;
}

/**
 * Makes sure a usable machine key is at `keyPath`, creating it on first use:
 * a node that enrols checks this before it speaks to the cluster, so that
 * sealing its configuration at the end cannot fail on a corrupt key after
 * the cluster has recorded the node. A key of the wrong size is
 * {@link FileCorruptedError}.
 */
export async function ensureMachineKey(keyPath: string): Promise<void> {
  const key = await loadOrCreateMachineKey(keyPath);
  key.fill(0);
}
