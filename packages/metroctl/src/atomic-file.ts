/**
 * Atomic file writes: a reader (or a crash) sees either the old file or the
 * whole new one, never half of it — a truncated owner key or certificate
 * would lock the operator out of the cluster.
 */
import { randomBytes } from "node:crypto";
import { link, open, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

/** A temporary file next to `path`, written fully and synced; returns its path. */
async function writeTemp(path: string, data: string | Uint8Array, mode: number): Promise<string> {
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  // The mode is set at creation: a key must never exist, even briefly, with looser permissions.
  const handle = await open(temp, "wx", mode);
  try {
    await handle.writeFile(data);
    await handle.sync();
    await handle.close();
  } catch (e) {
    await handle.close().catch(() => undefined);
    await unlink(temp).catch(() => undefined);
    throw e;
  }
  return temp;
}

/** Writes `data` to `path` atomically (temp file, fsync, rename), with file mode `mode`. */
export async function writeFileAtomic(
  path: string,
  data: string | Uint8Array,
  mode = 0o644,
): Promise<void> {
  const temp = await writeTemp(path, data, mode);
  try {
    await rename(temp, path);
  } catch (e) {
    await unlink(temp).catch(() => undefined);
    throw e;
  }
}

/**
 * Writes `data` to `path` atomically, but only if `path` does not exist yet:
 * resolves true when this call created it, false when it already existed.
 * Of two concurrent creators exactly one wins (link(2) does not replace).
 */
export async function createFileAtomic(
  path: string,
  data: string | Uint8Array,
  mode = 0o644,
): Promise<boolean> {
  const temp = await writeTemp(path, data, mode);
  try {
    await link(temp, path);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw e;
  } finally {
    await unlink(temp).catch(() => undefined);
  }
}
