/**
 * The ephemeral directory: runtime state (sockets, consensus scratch space,
 * workload mounts) that must not outlive a boot. On Monogon it is a tmpfs;
 * here it is wiped by the node at start, so nothing a previous run left
 * behind — a half-written file, a stale socket — can be mistaken for current.
 */
import * as fs from "node:fs/promises";
import * as path from "node:path";
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
