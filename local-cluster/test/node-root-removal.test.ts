/**
 * Removing node roots for good (a fresh node where an earlier attempt left
 * one, and `npm start -- --fresh`'s clean-up) after the node was SIGKILLed:
 * its ephemeral directory is still in memory — a tmpfs mounted inside the
 * root, on which `rm` fails with "Device or resource busy", or a private
 * directory under /dev/shm that removing the root alone would leak.
 * The killed node is what `placeInMemory` leaves when no release follows.
 */
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaultMemoryDir, memoryDirPrefix, placeNodeRoot } from "@metropolis/localstorage";
import { removeNodeRoot, removeNodeRoots } from "../src/node-root-removal";

/** How many mounts /proc/self/mountinfo lists on `mountPoint`. */
function mounts(mountPoint: string): number {
  return readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .filter((line) => line.split(" ")[4] === mountPoint).length;
}

/** The node's private directories under /dev/shm. */
async function memoryDirs(root: string): Promise<string[]> {
  const prefix = memoryDirPrefix(join(root, "ephemeral"));
  return (await readdir(defaultMemoryDir)).filter((name) => name.startsWith(prefix));
}

/** A node root whose node was killed: its ephemeral directory placed in memory, holding a file. */
async function killedNodeRoot(parent: string, name: string, tmpfs: boolean): Promise<string> {
  const root = join(parent, name);
  await mkdir(root, { mode: 0o700 });
  const placement = await placeNodeRoot(root).ephemeral.placeInMemory({ tmpfs });
  await writeFile(join(placement.path, "peer-key.pem"), "secret");
  return root;
}

let parent: string;
beforeEach(async () => {
  parent = await mkdtemp(join(tmpdir(), "local-cluster-roots-"));
});
afterEach(async () => {
  // Given back also after a failure: no mount, no /dev/shm directory left.
  for (const name of await readdir(parent).catch(() => [])) {
    await placeNodeRoot(join(parent, name)).ephemeral.release();
  }
  await rm(parent, { recursive: true, force: true });
});

const asRoot = process.getuid?.() === 0;

(asRoot ? it : it.skip)(
  `removes a killed node's root with its tmpfs still mounted (no EBUSY, no mount left)${asRoot ? "" : ": SKIPPED, mounting a tmpfs needs root"}`,
  async () => {
    const root = await killedNodeRoot(parent, "node1", true);
    const ephemeral = join(root, "ephemeral");
    expect(mounts(ephemeral)).toBe(1);
    await removeNodeRoot(root);
    expect(mounts(ephemeral)).toBe(0);
    expect(await readdir(parent)).toEqual([]);
  },
);

it("removes a killed node's root whose ephemeral directory is under /dev/shm, leaking nothing there", async () => {
  const root = await killedNodeRoot(parent, "node1", false);
  expect(await memoryDirs(root)).toHaveLength(1);
  await removeNodeRoot(root);
  expect(await memoryDirs(root)).toEqual([]);
  expect(await readdir(parent)).toEqual([]);
});

it("removes every root of a state directory, each as a killed node left it, then the directory", async () => {
  const roots = [
    await killedNodeRoot(parent, "node1", asRoot),
    await killedNodeRoot(parent, "node2", false),
  ];
  await removeNodeRoots(parent);
  for (const root of roots) {
    expect(mounts(join(root, "ephemeral"))).toBe(0);
    expect(await memoryDirs(root)).toEqual([]);
  }
  await expect(readdir(parent)).rejects.toMatchObject({ code: "ENOENT" });
});
