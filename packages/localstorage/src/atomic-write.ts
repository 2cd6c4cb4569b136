/**
 * Crash-safe file replacement. Every write in localstorage goes through here so
 * that a node killed at any instant finds either the old or the new content of
 * a file on its next boot, never a torn mix of both.
 */
import { randomBytes } from "node:crypto";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { FileExistsError } from "./errors";

/** Options of {@link atomicWriteFile}. */
export interface AtomicWriteOptions {
  /** Permission bits of the file; exact, not filtered by the umask. Default 0o644. */
  readonly mode?: number;
  /**
   * Fail with {@link FileExistsError} instead of replacing an existing file.
   * The check and the commit are one atomic step, so two racing writers cannot
   * both succeed.
   */
  readonly exclusive?: boolean;
  /**
   * Called once the temporary file is complete and synced, right before it is
   * committed under the target name. Exists for crash tests: a child process
   * pauses here and is killed. Production code leaves it unset.
   */
  readonly beforeRename?: (temporaryPath: string) => void | Promise<void>;
}

const temporaryPattern = /^\..+\.tmp-[0-9a-f]{16}$/;

/**
 * Whether a directory entry is a temporary file left by an interrupted
 * {@link atomicWriteFile}, as opposed to data. Readers never look at these:
 * they only ever open target names.
 */
export function isTemporaryName(name: string): boolean {
  return temporaryPattern.test(name);
}

/**
 * Replaces `target` with `data` atomically and durably: the data goes to a
 * temporary file in the same directory, which is synced and then renamed over
 * the target, and the directory is synced so the rename itself survives a
 * power loss. A crash before the rename leaves the old content and a stale
 * temporary file (see {@link removeStaleTemporaries}); after it, the new one.
 */
export async function atomicWriteFile(
  target: string,
  data: Uint8Array,
  options: AtomicWriteOptions = {},
): Promise<void> {
  const directory = path.dirname(target);
  // Random, not PID-based: PIDs repeat across boots, and a collision with a
  // stale temporary file would make the exclusive open below fail.
  const temporary = path.join(
    directory,
    `.${path.basename(target)}.tmp-${randomBytes(8).toString("hex")}`,
  );
  const mode = options.mode ?? 0o644;
  let committed = false;
  try {
    const handle = await fs.open(temporary, "wx", 0o600);
    try {
      await handle.writeFile(data);
      // open()'s mode is masked by the umask; the caller asked for these bits exactly.
      await handle.chmod(mode);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await options.beforeRename?.(temporary);
    if (options.exclusive) {
      await commitExclusive(temporary, target);
    } else {
      await fs.rename(temporary, target);
    }
    committed = true;
    await syncDirectory(directory);
  } finally {
    if (!committed) {
      await fs.rm(temporary, { force: true });
    }
  }
}

async function commitExclusive(temporary: string, target: string): Promise<void> {
  try {
    // link() fails with EEXIST if the target exists: check and commit in one
    // step, which rename() cannot do (it silently replaces).
    await fs.link(temporary, target);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EEXIST") {
      throw new FileExistsError(target);
    }
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "ENOSYS") {
      throw error;
    }
    // The filesystem has no hard links (a real ESP is FAT). Fall back to check
    // then rename: racy against another writer, but a node has one enrolment
    // manager writing its ESP, and the point is never to clobber by mistake.
    if (await pathExists(target)) {
      throw new FileExistsError(target);
    }
    await fs.rename(temporary, target);
    return;
  }
  await fs.rm(temporary, { force: true });
}

async function pathExists(target: string): Promise<boolean> {
  try {
    await fs.lstat(target);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      return false;
    }
    throw error;
  }
}

async function syncDirectory(directory: string): Promise<void> {
  const handle = await fs.open(directory, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Deletes the temporary files that interrupted writes left in `directory` and
 * returns their paths. Only safe while nothing writes to the directory, i.e.
 * at node start: a live writer's temporary file looks exactly like a stale one.
 */
export async function removeStaleTemporaries(directory: string): Promise<string[]> {
  let names: string[];
  try {
    names = await fs.readdir(directory);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      return [];
    }
    throw error;
  }
  const removed: string[] = [];
  for (const name of names.filter(isTemporaryName)) {
    const temporary = path.join(directory, name);
    await fs.rm(temporary, { force: true });
    removed.push(temporary);
  }
  return removed;
}
