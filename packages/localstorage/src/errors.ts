/**
 * The errors localstorage rejects with. They are classes so that callers (the
 * cluster enrolment manager above all) can tell "this node has no data yet"
 * from "this node's data has been tampered with" by `instanceof`, not by
 * parsing messages. Every error that concerns a file names its full path.
 */

/** Base class of every localstorage error, for callers that only need "storage failed". */
export abstract class LocalStorageError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    // Set once, here, from the class actually constructed: every subclass
    // shows its own name in stack traces and logs, and can be told apart by
    // `name` where `instanceof` does not work (another realm, a second copy of
    // the package). No subclass sets `name` itself.
    this.name = new.target.name;
  }
}

function describe(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause);
}

/**
 * A tree declaration is malformed: an empty name, a name with a slash, two
 * children with the same on-disk name, a property name that would shadow a
 * directory's own members, or one node used in two places. Thrown by `dir()`
 * and `file()`, so a bad layout fails where it is written, not on first use.
 */
export class InvalidTreeError extends LocalStorageError {}

/**
 * `place()` was misused: the tree was already placed, the node is not the root
 * of its tree, or the root path is not absolute. A tree has exactly one
 * location for its whole life so that every `fullPath` handed out stays true.
 */
export class PlacementError extends LocalStorageError {}

/** A node's path was needed before its tree was placed with `place()`. */
export class NotPlacedError extends LocalStorageError {
  constructor(
    /** The node's path relative to the root of its (unplaced) tree. */
    readonly relativePath: string,
  ) {
    super(
      `${relativePath || "tree root"} is not placed: call place() on the root of its tree first`,
    );
  }
}

/** A file that was read does not exist. */
export class FileMissingError extends LocalStorageError {
  constructor(
    /** Full path of the missing file. */
    readonly path: string,
  ) {
    super(`${path} does not exist`);
  }
}

/**
 * A file exists but its content cannot be trusted: the decoder rejected it
 * (truncated or corrupt), or its authentication tag did not verify (tampered
 * with, or encrypted under another key). Never returned as garbage data.
 */
export class FileCorruptedError extends LocalStorageError {
  constructor(
    /** Full path of the corrupted file. */
    readonly path: string,
    /** What is wrong with it. */
    readonly reason: string,
    cause?: unknown,
  ) {
    super(
      `${path} is corrupted: ${reason}${cause === undefined ? "" : `: ${describe(cause)}`}`,
      cause === undefined ? undefined : { cause },
    );
  }
}

/** An exclusive write found its target already there; the existing file was left untouched. */
export class FileExistsError extends LocalStorageError {
  constructor(
    /** Full path of the file that already exists. */
    readonly path: string,
  ) {
    super(`${path} already exists and was not overwritten`);
  }
}

/** An unlock key passed in has the wrong length. */
export class InvalidKeyError extends LocalStorageError {
  constructor(
    /** Which key: "node unlock key" or "cluster unlock key". */
    readonly key: string,
    /** The length it had, in bytes. */
    readonly length: number,
    /** The length it must have, in bytes. */
    readonly expected: number,
  ) {
    super(`${key} must be ${expected} bytes, got ${length}`);
  }
}

/** `mountExisting()` on a data directory that was never set up with `mountNew()`. */
export class DataNotInitializedError extends LocalStorageError {
  constructor(
    /** Full path of the data directory. */
    readonly path: string,
  ) {
    super(`data directory ${path} holds no node (no data marker); set it up with mountNew()`);
  }
}

/**
 * `mountNew()` on a data directory that already holds a node. Formatting it
 * would orphan that node's credentials, so it is refused; only an operator
 * who means it may remove the directory.
 */
export class DataAlreadyInitializedError extends LocalStorageError {
  constructor(
    /** Full path of the data directory. */
    readonly path: string,
  ) {
    super(`data directory ${path} already holds a node; refusing to set up a new one over it`);
  }
}

/** A data directory was mounted twice without `unmount()` in between. */
export class DataAlreadyMountedError extends LocalStorageError {
  constructor(
    /** Full path of the data directory. */
    readonly path: string,
  ) {
    super(`data directory ${path} is already mounted`);
  }
}

/** A file under the data directory was used before the data directory was mounted. */
export class DataNotMountedError extends LocalStorageError {
  constructor(
    /** Full path of the file that was accessed. */
    readonly path: string,
  ) {
    super(
      `${path} is on the data directory, which is not mounted: call mountNew() or mountExisting() first`,
    );
  }
}

/**
 * The data directory was set up under another policy than the caller expects.
 * Refused rather than followed so that swapping in an insecure data directory
 * cannot silently downgrade a node that is meant to be encrypted.
 */
export class DataPolicyMismatchError extends LocalStorageError {
  constructor(
    /** Full path of the data directory. */
    readonly path: string,
    /** The policy the caller asked for. */
    readonly expected: string,
    /** The policy recorded in the data directory. */
    readonly actual: string,
  ) {
    super(`data directory ${path} uses policy "${actual}", but "${expected}" was expected`);
  }
}

/** An encrypted data directory was mounted without one of the two unlock keys. */
export class MissingUnlockKeyError extends LocalStorageError {
  constructor(
    /** Full path of the data directory. */
    readonly path: string,
    /** Which key is missing: "node unlock key" or "cluster unlock key". */
    readonly key: string,
  ) {
    super(`data directory ${path} is encrypted: the ${key} is required to mount it`);
  }
}

/**
 * The unlock keys do not open the data directory: the key check value stored
 * in it did not verify under NUK XOR CUK. Detected at mount time, before any
 * secret is read, so a wrong key never yields garbage credentials.
 */
export class WrongDataKeyError extends LocalStorageError {
  constructor(
    /** Full path of the data directory. */
    readonly path: string,
  ) {
    super(`the unlock keys do not open data directory ${path} (key check failed)`);
  }
}

/**
 * A sealed configuration is corrupt or was sealed elsewhere: bad format, an
 * authentication tag that does not verify under this machine's key, or no
 * machine key at all. A distinct class because the caller's remedy differs
 * from a plain missing file: this node must not trust the ESP it booted from.
 */
export class SealedCorruptedError extends LocalStorageError {
  constructor(
    /** Full path of the sealed configuration. */
    readonly path: string,
    /** What is wrong with it. */
    readonly reason: string,
  ) {
    super(`sealed configuration ${path} cannot be unsealed: ${reason}`);
  }
}

/**
 * Sealing found a sealed configuration already there and was not told to
 * overwrite it. The existing one is left untouched: it may be the only copy of
 * this node's unlock key.
 */
export class SealedConfigurationExistsError extends LocalStorageError {
  constructor(
    /** Full path of the existing sealed configuration. */
    readonly path: string,
  ) {
    super(`sealed configuration ${path} already exists; pass { overwrite: true } to replace it`);
  }
}

/**
 * The ephemeral directory cannot be kept in memory: no tmpfs could be
 * mounted, and the memory directory (`/dev/shm`) is missing or not a memory
 * file system. Refused rather than placed on disk, where the secrets written
 * to it (the etcd peer key) would outlive the node.
 */
export class EphemeralPlacementError extends LocalStorageError {
  constructor(
    /** Full path of the ephemeral directory. */
    readonly path: string,
    /** Why neither placement was possible. */
    readonly reason: string,
  ) {
    super(`ephemeral directory ${path} cannot be kept in memory: ${reason}`);
  }
}

/**
 * The tmpfs of the ephemeral directory was emptied but could not be
 * unmounted (something still uses it); its memory is freed at the next
 * start's placement or at reboot.
 */
export class EphemeralReleaseError extends LocalStorageError {
  constructor(
    /** Full path of the ephemeral directory. */
    readonly path: string,
    /** What the unmount said. */
    readonly reason: string,
  ) {
    super(`ephemeral directory ${path} was emptied but not unmounted: ${reason}`);
  }
}

/**
 * A wipe of the node's storage (wipe.ts) left something behind, or could not
 * tell: it names every path still there and every error met. The storage is
 * then neither the node's nor empty, and must be erased by hand.
 */
export class WipeIncompleteError extends LocalStorageError {
  constructor(
    /** Paths still present after the wipe. */
    readonly remaining: readonly string[],
    /** Each failure, as `path: message`. */
    readonly failures: readonly string[],
  ) {
    const left =
      remaining.length > 0
        ? `${remaining.length} entries remain (${remaining.slice(0, 8).join(", ")}${remaining.length > 8 ? ", …" : ""})`
        : "nothing is listed as remaining";
    super(
      `the wipe of the node's storage is incomplete: ${left}` +
        (failures.length > 0 ? `; errors: ${failures.slice(0, 8).join("; ")}` : "") +
        "; erase them by hand",
    );
  }
}
