/**
 * Removing a node's root for good: a fresh node where an earlier attempt
 * left one, or the leftovers of a creation that never finished. A node that
 * was killed still holds its ephemeral directory in memory — a tmpfs
 * mounted inside its root, which `rm` cannot remove, or a private directory
 * under /dev/shm, which removing the root alone would leak — so it is
 * released first (@metropolis/localstorage).
 */
import { readdir, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { placeNodeRoot } from "@metropolis/localstorage";

/** Releases the ephemeral directory of the node root `root`, then removes the root. */
export async function removeNodeRoot(root: string): Promise<void> {
  await placeNodeRoot(resolve(root)).ephemeral.release();
  await rm(root, { recursive: true, force: true });
}

/** {@link removeNodeRoot} for every directory in `dir` (one root each), then `dir` itself. */
export async function removeNodeRoots(dir: string): Promise<void> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return;
    throw e;
  }
  for (const entry of entries) {
    if (entry.isDirectory()) await removeNodeRoot(join(dir, entry.name));
  }
  await rm(dir, { recursive: true, force: true });
}
