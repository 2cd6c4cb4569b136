/**
 * The ephemeral directory: runtime state (sockets, the plain etcd peer key
 * etcd reads, consensus scratch space, workload mounts) that must neither
 * outlive a run of the node nor ever reach a disk. A node places it in
 * memory at start ({@link EphemeralDirectory.placeInMemory}: a tmpfs when it
 * runs as root, as on Monogon, else a private directory under /dev/shm
 * behind a symlink; see in-memory-placement.ts), which also clears whatever
 * a killed earlier run left, and releases it at a graceful stop
 * ({@link EphemeralDirectory.release}). `wipe()` only empties it where it
 * is, for in-process test nodes that keep it on disk.
 */
import * as fs from "node:fs/promises";
import * as path from "node:path";
import {
  placeInMemory,
  releaseFromMemory,
  type InMemoryOptions,
  type InMemoryPlacement,
} from "./in-memory-placement";
import { Children, Directory, DirOptions, NoShadowing, populate } from "./tree";

/** A directory emptied at every node start; declare it with {@link ephemeralDir}. */
export class EphemeralDirectory extends Directory {
  /** Use {@link ephemeralDir}. */
  constructor(options: DirOptions = {}) {
    super(options);
  }

  /**
   * Deletes everything inside this directory and recreates the declared
   * subdirectories empty. Creates the directory if it does not exist yet.
   * Leaves it where it is (in memory or not): see {@link placeInMemory}.
   */
  async wipe(): Promise<void> {
    const fullPath = this.fullPath;
    await fs.mkdir(fullPath, { recursive: true, mode: 0o700 });
    // The entries go, not the directory itself: it may be a mount point (a
    // tmpfs, as on Monogon), which cannot be removed.
    for (const name of await fs.readdir(fullPath)) {
      await fs.rm(path.join(fullPath, name), { recursive: true, force: true });
    }
    await this.mkdirAll();
  }

  /**
   * Puts this directory in memory, empty, with its declared subdirectories:
   * what a node does at start. Clears what an earlier run left first (a tmpfs
   * still mounted is reused, never stacked; its old private directories under
   * /dev/shm are removed; a directory on disk is deleted). Returns where it
   * went; throws `EphemeralPlacementError` rather than fall back to a disk.
   */
  async placeInMemory(options?: InMemoryOptions): Promise<InMemoryPlacement> {
    const placement = await placeInMemory(this.fullPath, options);
    await this.mkdirAll();
    return placement;
  }

  /**
   * Empties this directory and gives its memory back (unmounts the tmpfs, or
   * removes the symlink and the private directory): what a node does at a
   * graceful stop, and what removing a node's root for good needs first.
   * Safe to call when it was never placed. Throws `EphemeralReleaseError`
   * when a tmpfs was emptied but would not unmount.
   */
  release(options?: Pick<InMemoryOptions, "memoryDir">): Promise<void> {
    return releaseFromMemory(this.fullPath, options);
  }
}

/**
 * Declares an ephemeral directory (see {@link EphemeralDirectory}) whose
 * children are typed properties, like `dir()`.
 */
export function ephemeralDir<C extends Children = Record<never, never>>(
  children: C & NoShadowing<EphemeralDirectory>,
  options?: DirOptions,
): EphemeralDirectory & Readonly<NoInfer<C>> {
  return populate(new EphemeralDirectory(options), children);
}
