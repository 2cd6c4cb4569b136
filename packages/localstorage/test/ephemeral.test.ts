/**
 * The ephemeral directory in memory: where it is placed (a tmpfs as root, a
 * private /dev/shm directory behind a symlink otherwise), that a placement
 * clears what an earlier run left (also one that was killed: no directory
 * leaks per start), and that release gives everything back. Each test uses
 * a memory directory of its own under /dev/shm, and removes it.
 */
import { readFileSync } from "node:fs";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { memoryDirPrefix, placeNodeRoot } from "../src";
import { EphemeralPlacementError } from "../src/errors";
import { type InMemoryPlacement } from "../src/in-memory-placement";

let root: string;
let memoryDir: string;
const mountedHere: string[] = [];

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), "localstorage-ephemeral-"));
  memoryDir = await fs.mkdtemp("/dev/shm/localstorage-test-");
});

afterEach(async () => {
  // Whatever a test placed is released, also after a failure: no mount and no memory left behind.
  await placeNodeRoot(root).ephemeral.release({ memoryDir });
  for (const mountPoint of mountedHere.splice(0)) {
    expect(mounts(mountPoint)).toBe(0);
  }
  await fs.rm(root, { recursive: true, force: true });
  await fs.rm(memoryDir, { recursive: true, force: true });
});

/** How many mounts /proc/self/mountinfo lists on `mountPoint`. */
function mounts(mountPoint: string): number {
  const text = readFileSync("/proc/self/mountinfo", "utf8");
  return text.split("\n").filter((line) => line.split(" ")[4] === mountPoint).length;
}

/** This root's private directories in the test's memory directory. */
async function ownMemoryDirs(): Promise<string[]> {
  const prefix = memoryDirPrefix(path.join(root, "ephemeral"));
  return (await fs.readdir(memoryDir)).filter((name) => name.startsWith(prefix));
}

/** A placement as a fresh node run makes it: a new view of the same root. */
function place(options: { tmpfs?: boolean } = { tmpfs: false }): Promise<InMemoryPlacement> {
  return placeNodeRoot(root).ephemeral.placeInMemory({ memoryDir, ...options });
}

describe("without a tmpfs", () => {
  it("is a symlink to a private 0700 directory on the memory file system, with its subdirectories", async () => {
    const placement = await place();
    expect(placement.kind).toBe("memory-dir");
    const link = path.join(root, "ephemeral");
    expect((await fs.lstat(link)).isSymbolicLink()).toBe(true);
    expect(await fs.realpath(link)).toBe(placement.path);
    expect(path.dirname(placement.path)).toBe(memoryDir);
    expect(path.basename(placement.path)).toMatch(
      new RegExp(`^${memoryDirPrefix(link)}[A-Za-z0-9]{6}$`),
    );
    expect((await fs.stat(placement.path)).mode & 0o777).toBe(0o700);
    expect((await fs.statfs(placement.path)).type).toBe(0x01021994);
    const storage = placeNodeRoot(root);
    for (const sub of [storage.ephemeral.consensus, storage.ephemeral.curator]) {
      expect((await fs.stat(sub.fullPath)).isDirectory()).toBe(true);
    }
    await fs.writeFile(path.join(storage.ephemeral.consensus.fullPath, "peer-key.pem"), "secret");
    expect(await fs.readFile(path.join(placement.path, "consensus", "peer-key.pem"), "utf8")).toBe(
      "secret",
    );
  });

  it("deletes a directory on disk (an older layout) with what it held", async () => {
    const old = path.join(root, "ephemeral", "consensus");
    await fs.mkdir(old, { recursive: true });
    await fs.writeFile(path.join(old, "peer-key.pem"), "PRIVATE KEY");
    const placement = await place();
    expect((await fs.lstat(path.join(root, "ephemeral"))).isSymbolicLink()).toBe(true);
    expect(await fs.readdir(path.join(placement.path, "consensus"))).toEqual([]);
  });

  it("clears what a killed run left at the next start, and never leaks a directory per start", async () => {
    const first = await place();
    await fs.writeFile(path.join(first.path, "consensus", "peer-key.pem"), "secret");
    // Killed: no release. Each next run finds the old directory and removes it.
    const seen = new Set<string>([first.path]);
    for (let run = 0; run < 3; run++) {
      const next = await place();
      expect(seen.has(next.path)).toBe(false);
      seen.add(next.path);
      expect(await ownMemoryDirs()).toEqual([path.basename(next.path)]);
      expect(await fs.readdir(path.join(next.path, "consensus"))).toEqual([]);
    }
    // A placement interrupted between its directory and its symlink leaves an orphan: found by name.
    const orphan = path.join(memoryDir, memoryDirPrefix(path.join(root, "ephemeral")) + "orphan");
    await fs.mkdir(orphan, { mode: 0o700 });
    await fs.rm(path.join(root, "ephemeral"));
    const after = await place();
    expect(await ownMemoryDirs()).toEqual([path.basename(after.path)]);
  });

  it("release removes the symlink and the private directory; again, or never placed, is fine", async () => {
    await placeNodeRoot(root).ephemeral.release({ memoryDir });
    const placement = await place();
    await placeNodeRoot(root).ephemeral.release({ memoryDir });
    await expect(fs.lstat(path.join(root, "ephemeral"))).rejects.toThrow(/ENOENT/);
    await expect(fs.stat(placement.path)).rejects.toThrow(/ENOENT/);
    expect(await ownMemoryDirs()).toEqual([]);
    await placeNodeRoot(root).ephemeral.release({ memoryDir });
  });

  it("leaves another node's directories alone", async () => {
    const otherRoot = await fs.mkdtemp(path.join(os.tmpdir(), "localstorage-ephemeral-other-"));
    try {
      const other = await placeNodeRoot(otherRoot).ephemeral.placeInMemory({
        memoryDir,
        tmpfs: false,
      });
      await place();
      await place();
      await placeNodeRoot(root).ephemeral.release({ memoryDir });
      expect((await fs.stat(other.path)).isDirectory()).toBe(true);
      await placeNodeRoot(otherRoot).ephemeral.release({ memoryDir });
    } finally {
      await fs.rm(otherRoot, { recursive: true, force: true });
    }
  });

  (process.getuid?.() === 0 ? it : it.skip)(
    "neither uses nor removes another user's directory of the same name (run as root)",
    async () => {
      const foreign = path.join(
        memoryDir,
        memoryDirPrefix(path.join(root, "ephemeral")) + "foreign",
      );
      await fs.mkdir(foreign, { mode: 0o777 });
      await fs.chown(foreign, 65534, 65534);
      const placement = await place();
      expect(placement.path).not.toBe(foreign);
      await placeNodeRoot(root).ephemeral.release({ memoryDir });
      expect((await fs.stat(foreign)).uid).toBe(65534);
    },
  );

  it("refuses, rather than use a disk, when the memory directory is no memory file system", async () => {
    // This test's own directory: on the repository's disk, and only looked at.
    const onDisk = __dirname;
    expect([0x01021994, 0x858458f6]).not.toContain((await fs.statfs(onDisk)).type);
    const error = await placeNodeRoot(root)
      .ephemeral.placeInMemory({ memoryDir: onDisk, tmpfs: false })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EphemeralPlacementError);
    expect((error as Error).message).toContain(path.join(root, "ephemeral"));
    expect((error as Error).message).toContain(`${onDisk} is not a memory file system`);
    await expect(fs.lstat(path.join(root, "ephemeral"))).rejects.toThrow(/ENOENT/);
  });
});

describe("as root", () => {
  it("mounts a tmpfs where the system allows it (else falls back, saying why), reuses it after a kill, and unmounts it at release", async () => {
    const dir = path.join(root, "ephemeral");
    const placement = await place({ tmpfs: true });
    if (process.getuid?.() !== 0) {
      // Not root: no tmpfs is even tried.
      expect(placement).toEqual({ kind: "memory-dir", path: placement.path });
      return;
    }
    if (placement.kind === "memory-dir") {
      // A container without CAP_SYS_ADMIN: the fallback, with mount's refusal.
      expect(placement.tmpfsRefused).toMatch(/^mount -t tmpfs failed: /);
      return;
    }
    mountedHere.push(dir);
    expect(placement).toEqual({ kind: "tmpfs", path: dir });
    expect(mounts(dir)).toBe(1);
    expect((await fs.stat(dir)).mode & 0o777).toBe(0o700);
    await fs.writeFile(path.join(dir, "consensus", "peer-key.pem"), "secret");
    // Killed, then started again: the same mount, emptied; none stacked on it.
    expect(await place({ tmpfs: true })).toEqual({ kind: "tmpfs", path: dir });
    expect(mounts(dir)).toBe(1);
    expect(await fs.readdir(path.join(dir, "consensus"))).toEqual([]);
    await placeNodeRoot(root).ephemeral.release({ memoryDir });
    expect(mounts(dir)).toBe(0);
    expect(await fs.readdir(dir)).toEqual([]);
  });
});
