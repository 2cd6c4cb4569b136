/**
 * The data directory: the userspace counterpart of Monogon's encrypted data
 * partition. Nothing below it can be read or written until it is mounted, and
 * mounting an encrypted one takes two keys held in different places — the node
 * unlock key (NUK) in the node's sealed configuration, the cluster unlock key
 * (CUK) in the cluster — so that neither a stolen disk nor a compromised
 * cluster alone reveals the node's private keys. The data key is NUK XOR CUK.
 */
import { randomBytes } from "node:crypto";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { atomicWriteFile } from "./atomic-write";
import { DataMarker, DataPolicy, dataPolicies, decodeMarker, encodeMarker } from "./data-marker";
import { keyLength, openEnvelope, sealEnvelope } from "./envelope";
import {
  DataAlreadyInitializedError,
  DataAlreadyMountedError,
  DataNotInitializedError,
  DataNotMountedError,
  DataPolicyMismatchError,
  FileCorruptedError,
  FileExistsError,
  InvalidKeyError,
  MissingUnlockKeyError,
  WrongDataKeyError,
} from "./errors";
import {
  Children,
  ContentProtection,
  contentAccess,
  Directory,
  DirOptions,
  File,
  NoShadowing,
  populate,
} from "./tree";

/** The two keys made by {@link DataDirectory.mountNew}. */
export interface UnlockKeys {
  /** NUK: 32 bytes, to be kept in the node's sealed configuration on the ESP. */
  readonly nodeUnlockKey: Buffer;
  /** CUK: 32 bytes, to be handed to the cluster and fetched from it on later boots. */
  readonly clusterUnlockKey: Buffer;
}

/** Arguments of {@link DataDirectory.mountExisting}. */
export interface MountExistingOptions {
  /**
   * The policy the node expects (from its sealed configuration). Must equal
   * the one the directory was set up with: a mismatch is an error, never a
   * silent downgrade.
   */
  readonly policy: DataPolicy;
  /** NUK; required unless the policy is `insecure`. */
  readonly nodeUnlockKey?: Uint8Array;
  /** CUK; required unless the policy is `insecure`. */
  readonly clusterUnlockKey?: Uint8Array;
}

/** Name of the marker file inside the data directory. */
export const dataMarkerName = ".metropolis-data.json";

const keyCheckMagic = "MTKC";
const keyCheckAssociatedData = "metropolis-ts data key check";
const keyCheckBlock = Buffer.alloc(32, "metropolis-ts data key check v1 ");
const secretFileMagic = "MTSF";

const plain: ContentProtection = {
  seal: (_file, plaintext) => plaintext,
  open: (_file, stored) => stored,
};

interface Mount {
  readonly policy: DataPolicy;
  readonly key: Buffer | undefined;
  readonly protection: ContentProtection;
}

/**
 * A data directory; declare it with {@link dataDir}. Files below it are
 * refused with {@link DataNotMountedError} until {@link mountNew} (first boot)
 * or {@link mountExisting} (every later boot) succeeds.
 */
export class DataDirectory extends Directory {
  #mount: Mount | undefined;

  /** Use {@link dataDir}. */
  constructor(options: DirOptions = {}) {
    super(options, [dataMarkerName]);
  }

  /** The policy of the mounted directory; undefined while not mounted. */
  get policy(): DataPolicy | undefined {
    return this.#mount?.policy;
  }

  /**
   * Sets up a new node's data directory under `policy` and mounts it: makes
   * the declared directories, draws fresh unlock keys and records the policy
   * and a key check value in the marker file. Refuses with
   * {@link DataAlreadyInitializedError} if a marker is already there — it never
   * formats over an existing node. Under `insecure` the keys protect nothing
   * and `mountExisting()` does not need them; they are drawn all the same so
   * that the caller handles every policy alike.
   */
  async mountNew(policy: DataPolicy): Promise<UnlockKeys> {
    this.#refuseIfMounted();
    checkPolicy(policy);
    const keys: UnlockKeys = {
      nodeUnlockKey: randomBytes(keyLength),
      clusterUnlockKey: randomBytes(keyLength),
    };
    const key = policy === "insecure" ? undefined : dataKey(keys);
    const marker: DataMarker =
      key === undefined
        ? { policy }
        : {
            policy,
            keyCheck: sealEnvelope(key, keyCheckMagic, keyCheckAssociatedData, keyCheckBlock),
          };
    // Creating directories that already exist changes nothing, so an existing
    // node is only detected at the marker. The marker goes last and
    // exclusively: a crash before it leaves a directory that mountNew() may set
    // up again, and nothing can replace a marker (and with it the key check)
    // that is already there.
    await this.mkdirAll();
    try {
      await atomicWriteFile(this.#markerPath(), encodeMarker(marker), {
        mode: 0o600,
        exclusive: true,
      });
    } catch (error) {
      if (error instanceof FileExistsError) {
        throw new DataAlreadyInitializedError(this.fullPath);
      }
      throw error;
    }
    this.#mount = this.#makeMount(policy, key);
    return keys;
  }

  /**
   * Mounts the data directory of a node set up earlier. Checks, in order:
   * that there is a node ({@link DataNotInitializedError}), that its marker is
   * sound ({@link FileCorruptedError}), that its policy is `options.policy`
   * ({@link DataPolicyMismatchError}), that both keys were given when needed
   * ({@link MissingUnlockKeyError}, {@link InvalidKeyError}) and that they are
   * the right ones ({@link WrongDataKeyError}).
   */
  async mountExisting(options: MountExistingOptions): Promise<void> {
    this.#refuseIfMounted();
    checkPolicy(options.policy);
    const markerPath = this.#markerPath();
    let bytes: Buffer;
    try {
      bytes = await fs.readFile(markerPath);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") {
        throw new DataNotInitializedError(this.fullPath);
      }
      throw error;
    }
    let marker: DataMarker;
    try {
      marker = decodeMarker(bytes);
    } catch (error) {
      throw new FileCorruptedError(markerPath, "not a valid data marker", error);
    }
    if (marker.policy !== options.policy) {
      throw new DataPolicyMismatchError(this.fullPath, options.policy, marker.policy);
    }
    if (marker.keyCheck === undefined) {
      this.#mount = this.#makeMount(marker.policy, undefined);
      return;
    }
    const keys = {
      nodeUnlockKey: this.#requireKey(options.nodeUnlockKey, "node unlock key"),
      clusterUnlockKey: this.#requireKey(options.clusterUnlockKey, "cluster unlock key"),
    };
    const key = dataKey(keys);
    const check = openEnvelope(key, keyCheckMagic, keyCheckAssociatedData, marker.keyCheck);
    if (!check.ok || !check.plaintext.equals(keyCheckBlock)) {
      key.fill(0);
      throw new WrongDataKeyError(this.fullPath);
    }
    this.#mount = this.#makeMount(marker.policy, key);
  }

  /**
   * Whether the directory holds a node: its marker is there, whether mounted
   * or not. What a node that is about to enrol afresh checks first, so that it
   * learns that {@link mountNew} would refuse before it has told a cluster
   * about itself.
   */
  async isInitialized(): Promise<boolean> {
    try {
      await fs.lstat(this.#markerPath());
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
      throw error;
    }
  }

  /** Forgets the data key; files below become unreachable until mounted again. */
  unmount(): void {
    this.#mount?.key?.fill(0);
    this.#mount = undefined;
  }

  /** Refuses access while not mounted; protects secret files under the mounted policy. */
  override [contentAccess](file: File<unknown>): ContentProtection {
    if (this.#mount === undefined) {
      throw new DataNotMountedError(file.fullPath);
    }
    return this.#mount.protection;
  }

  #markerPath(): string {
    return path.join(this.fullPath, dataMarkerName);
  }

  #refuseIfMounted(): void {
    if (this.#mount !== undefined) {
      throw new DataAlreadyMountedError(this.fullPath);
    }
  }

  #requireKey(key: Uint8Array | undefined, which: string): Uint8Array {
    if (key === undefined) {
      throw new MissingUnlockKeyError(this.fullPath, which);
    }
    if (key.length !== keyLength) {
      throw new InvalidKeyError(which, key.length, keyLength);
    }
    return key;
  }

  #makeMount(policy: DataPolicy, key: Buffer | undefined): Mount {
    if (key === undefined) {
      return { policy, key, protection: plain };
    }
    // The associated data binds each file's ciphertext to its path in the
    // directory, so that swapping two encrypted files (say, the peer key for
    // the credentials key) fails to verify instead of loading the wrong key.
    const associatedData = (file: File<unknown>): string =>
      `metropolis-ts data file ${path.relative(this.fullPath, file.fullPath)}`;
    return {
      policy,
      key,
      protection: {
        seal: (file, plaintext) =>
          sealEnvelope(key, secretFileMagic, associatedData(file), plaintext),
        open: (file, stored) => {
          const opened = openEnvelope(key, secretFileMagic, associatedData(file), stored);
          if (!opened.ok) {
            throw new FileCorruptedError(file.fullPath, opened.reason);
          }
          return opened.plaintext;
        },
      },
    };
  }
}

/**
 * Declares a data directory (see {@link DataDirectory}) whose children are
 * typed properties, like `dir()`.
 */
export function dataDir<C extends Children = Record<never, never>>(
  children: C & NoShadowing<DataDirectory>,
  options?: DirOptions,
): DataDirectory & Readonly<NoInfer<C>> {
  return populate(new DataDirectory(options), children);
}

function dataKey(keys: { nodeUnlockKey: Uint8Array; clusterUnlockKey: Uint8Array }): Buffer {
  const key = Buffer.alloc(keyLength);
  for (let i = 0; i < keyLength; i++) {
    key[i] = keys.nodeUnlockKey[i] ^ keys.clusterUnlockKey[i];
  }
  return key;
}

function checkPolicy(policy: DataPolicy): void {
  if (!dataPolicies.includes(policy)) {
    throw new RangeError(
      `unknown data policy ${JSON.stringify(policy)}; expected one of ${dataPolicies.join(", ")}`,
    );
  }
}
