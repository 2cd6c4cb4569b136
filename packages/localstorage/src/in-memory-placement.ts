/**
 * Keeping a directory in memory, so that what is written to it never reaches
 * a disk: the etcd peer key that etcd reads in plain text, sockets, scratch
 * files. On Monogon the ephemeral directory is a tmpfs; here it is one too
 * when the node may mount it, and a private directory on the machine's
 * memory file system (`/dev/shm`) behind a symlink otherwise:
 *
 * - as root, a tmpfs is mounted on the directory (`mount -t tmpfs`, mode
 *   0700, nosuid, nodev). In a container without CAP_SYS_ADMIN that fails,
 *   and the fallback below is taken, with the reason reported.
 * - otherwise `<dir>` becomes a symlink to `/dev/shm/metropolis-ephemeral-<tag>-<random>`,
 *   made by `mkdtemp` (mode 0700, a name no one can guess ahead). `<tag>` is
 *   derived from the directory's path, so that the directories of one node
 *   can be found again by name.
 *
 * Both survive a SIGKILL of the node (memory is only freed by an unmount, a
 * removal or a reboot), so placing again first finds what an earlier run
 * left: a tmpfs still mounted on the directory is emptied and used again
 * (never a second mount stacked on it), and every private directory of this
 * path under `/dev/shm` that the current user owns is removed, whether or
 * not the symlink still points at it. A plain directory on disk (an older
 * layout) is removed with everything in it before anything is placed.
 * Releasing (at a graceful stop) empties the directory and unmounts the
 * tmpfs, or removes the symlink and the private directories.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import type { Stats } from "node:fs";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { promisify } from "node:util";
import { EphemeralPlacementError, EphemeralReleaseError } from "./errors";

const run = promisify(execFile);

/** `statfs` f_type of tmpfs and ramfs (linux/magic.h): the file systems that live in memory. */
const tmpfsMagic = 0x01021994;
const ramfsMagic = 0x858458f6;

/** Where private in-memory directories are made when no tmpfs can be mounted. */
export const defaultMemoryDir = "/dev/shm";

/** Options of {@link placeInMemory} and {@link releaseFromMemory}. */
export interface InMemoryOptions {
  /** Try to mount a tmpfs when running as root; default true. */
  readonly tmpfs?: boolean;
  /** The memory file system private directories are made in; default `/dev/shm`. */
  readonly memoryDir?: string;
}

/** Where {@link placeInMemory} put a directory. */
export type InMemoryPlacement =
  /** A tmpfs mounted on the directory itself. */
  | { readonly kind: "tmpfs"; readonly path: string }
  /** A symlink to the private directory `path` on the memory file system. */
  | {
      readonly kind: "memory-dir";
      readonly path: string;
      /** Why no tmpfs was mounted, when one was tried (running as root). */
      readonly tmpfsRefused?: string;
    };

/**
 * Puts `dirPath` in memory, empty, after clearing whatever an earlier run
 * left there (see the module comment). Throws {@link EphemeralPlacementError}
 * when neither a tmpfs can be mounted nor the memory directory is a memory
 * file system: the caller's secrets would land on a disk.
 */
export async function placeInMemory(
  dirPath: string,
  options: InMemoryOptions = {},
): Promise<InMemoryPlacement> {
  const memoryDir = options.memoryDir ?? defaultMemoryDir;
  const entry = await lstatOrUndefined(dirPath);
  if (entry?.isDirectory() && (await isMountedTmpfs(dirPath))) {
    // Mounted by an earlier run that did not get to release it.
    await emptyDirectory(dirPath);
    await fs.chmod(dirPath, 0o700);
    await removeOwnMemoryDirs(dirPath, memoryDir);
    return { kind: "tmpfs", path: dirPath };
  }
  // A symlink (only the link goes: fs.rm does not follow it), or a directory
  // on disk whose files may be secrets an older version left in plain text.
  if (entry) await fs.rm(dirPath, { recursive: true, force: true });
  await removeOwnMemoryDirs(dirPath, memoryDir);
  let tmpfsRefused: string | undefined;
  if (options.tmpfs !== false && process.getuid?.() === 0) {
    tmpfsRefused = await mountTmpfs(dirPath);
    if (tmpfsRefused === undefined) return { kind: "tmpfs", path: dirPath };
  }
  const target = await makeMemoryDir(dirPath, memoryDir, tmpfsRefused);
  await fs.symlink(target, dirPath);
  return { kind: "memory-dir", path: target, tmpfsRefused };
}

/**
 * Undoes {@link placeInMemory}: a tmpfs is emptied and unmounted (the empty
 * mount point stays), a symlink is removed with the private directories of
 * `dirPath`; a plain directory is emptied. Nothing there is not an error.
 * Throws {@link EphemeralReleaseError} when the unmount fails (the tmpfs is
 * empty by then).
 */
export async function releaseFromMemory(
  dirPath: string,
  options: Pick<InMemoryOptions, "memoryDir"> = {},
): Promise<void> {
  const memoryDir = options.memoryDir ?? defaultMemoryDir;
  try {
    const entry = await lstatOrUndefined(dirPath);
    if (entry?.isSymbolicLink()) {
      await fs.unlink(dirPath);
    } else if (entry?.isDirectory()) {
      await emptyDirectory(dirPath);
      if (await isMountedTmpfs(dirPath)) {
        try {
          await run("umount", [dirPath], { timeout: 10_000 });
        } catch (error) {
          throw new EphemeralReleaseError(dirPath, commandFailure("umount", error));
        }
      }
    }
  } finally {
    // Whatever became of the link (removed with the root, replaced), the memory goes.
    await removeOwnMemoryDirs(dirPath, memoryDir);
  }
}

/** Whether a tmpfs is mounted on `dirPath` itself (not merely somewhere above it). */
export async function isMountedTmpfs(dirPath: string): Promise<boolean> {
  const own = await lstatOrUndefined(dirPath);
  if (!own?.isDirectory()) return false;
  const parent = await fs.stat(path.dirname(dirPath));
  if (own.dev === parent.dev) return false;
  return (await fs.statfs(dirPath)).type === tmpfsMagic;
}

/** The name prefix of `dirPath`'s private directories in the memory directory. */
export function memoryDirPrefix(dirPath: string): string {
  const tag = createHash("sha256").update(path.resolve(dirPath)).digest("hex").slice(0, 16);
  return `metropolis-ephemeral-${tag}-`;
}

/** Mounts a tmpfs on `dirPath`; returns why it could not, or undefined when it is mounted. */
async function mountTmpfs(dirPath: string): Promise<string | undefined> {
  await fs.mkdir(dirPath, { recursive: true, mode: 0o700 });
  try {
    await run("mount", ["-t", "tmpfs", "-o", "mode=0700,nosuid,nodev", "tmpfs", dirPath], {
      timeout: 10_000,
    });
  } catch (error) {
    await fs.rmdir(dirPath).catch(() => undefined);
    return commandFailure("mount -t tmpfs", error);
  }
  if (!(await isMountedTmpfs(dirPath))) {
    await fs.rmdir(dirPath).catch(() => undefined);
    return "mount -t tmpfs reported success, but no tmpfs is mounted there";
  }
  return undefined;
}

/** A new private directory for `dirPath` on the memory file system `memoryDir`. */
async function makeMemoryDir(
  dirPath: string,
  memoryDir: string,
  tmpfsRefused: string | undefined,
): Promise<string> {
  const refusal = (why: string) =>
    new EphemeralPlacementError(
      dirPath,
      (tmpfsRefused === undefined ? "" : `no tmpfs could be mounted (${tmpfsRefused}), and `) +
        `${memoryDir} ${why}`,
    );
  let type: number;
  try {
    type = (await fs.statfs(memoryDir)).type;
  } catch (error) {
    throw refusal(`cannot be used: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (type !== tmpfsMagic && type !== ramfsMagic) {
    throw refusal("is not a memory file system (tmpfs or ramfs)");
  }
  // mkdtemp: mode 0700 and a random name, so no one else can have made it first.
  return fs.mkdtemp(path.join(memoryDir, memoryDirPrefix(dirPath)));
}

/**
 * Removes the private directories of `dirPath` in `memoryDir` that this
 * user owns: the one in use by an earlier run, and any an interrupted
 * placement left without a symlink. Another user's directory of the same
 * name is left alone (it is not ours to trust or to delete).
 */
async function removeOwnMemoryDirs(dirPath: string, memoryDir: string): Promise<void> {
  let names: string[];
  try {
    names = await fs.readdir(memoryDir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  const prefix = memoryDirPrefix(dirPath);
  const uid = process.getuid?.();
  for (const name of names.filter((n) => n.startsWith(prefix))) {
    const candidate = path.join(memoryDir, name);
    const stats = await lstatOrUndefined(candidate);
    if (stats?.isDirectory() && (uid === undefined || stats.uid === uid)) {
      await fs.rm(candidate, { recursive: true, force: true });
    }
  }
}

/** Removes everything inside `dirPath`, keeping the directory (it may be a mount point). */
async function emptyDirectory(dirPath: string): Promise<void> {
  for (const name of await fs.readdir(dirPath)) {
    await fs.rm(path.join(dirPath, name), { recursive: true, force: true });
  }
}

async function lstatOrUndefined(p: string): Promise<Stats | undefined> {
  try {
    return await fs.lstat(p);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/** What a failed command said: its stderr, else the error's message. */
function commandFailure(command: string, error: unknown): string {
  const stderr = (error as { stderr?: unknown }).stderr;
  const said =
    typeof stderr === "string" && stderr.trim() !== ""
      ? stderr.trim()
      : error instanceof Error
        ? error.message
        : String(error);
  return `${command} failed: ${said}`;
}
