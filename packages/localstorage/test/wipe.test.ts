/**
 * wipeNodeStorage on a real directory tree: a node's data directory and ESP
 * laid out as a node leaves them are emptied (the directories and the
 * machine key stay), and a wipe that cannot finish rejects naming what is
 * left instead of passing silently.
 */
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { placeNodeRoot, wipeNodeStorage, WipeIncompleteError } from "../src";

let root: string;

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), "localstorage-wipe-"));
});

afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

/** Writes the files a node that belonged to a cluster leaves behind, and the machine key. */
async function populate(node: ReturnType<typeof placeNodeRoot>): Promise<void> {
  await node.esp.metropolis.mkdirAll();
  await fs.writeFile(node.esp.metropolis.sealedConfiguration.fullPath, "sealed");
  await fs.writeFile(node.esp.metropolis.parameters.fullPath, "parameters");
  await fs.mkdir(path.join(node.data.etcd.data.fullPath, "member", "wal"), { recursive: true });
  await fs.writeFile(path.join(node.data.etcd.data.fullPath, "member", "wal", "0.wal"), "wal");
  await fs.mkdir(node.data.node.credentials.fullPath, { recursive: true });
  await fs.writeFile(node.data.node.credentials.key.fullPath, "key");
  await fs.writeFile(path.join(node.data.fullPath, ".metropolis-data.json"), "{}");
  await fs.writeFile(path.join(root, "machine.key"), "machine");
}

test("empties the data directory and the ESP, keeping them and the machine key", async () => {
  const node = placeNodeRoot(root);
  await populate(node);
  const report = await wipeNodeStorage(node);
  expect(report.emptied).toEqual([
    { path: node.data.fullPath, removed: [".metropolis-data.json", "etcd", "node"].sort() },
    { path: node.esp.fullPath, removed: ["metropolis"] },
  ]);
  expect(await fs.readdir(node.data.fullPath)).toEqual([]);
  expect(await fs.readdir(node.esp.fullPath)).toEqual([]);
  expect((await fs.readdir(root)).sort()).toEqual(["data", "esp", "machine.key"]);
});

test("a node that never wrote anything is wiped without error", async () => {
  const node = placeNodeRoot(root);
  expect(await wipeNodeStorage(node)).toEqual({
    emptied: [
      { path: node.data.fullPath, removed: [] },
      { path: node.esp.fullPath, removed: [] },
    ],
  });
});

test("a wipe that cannot finish rejects naming what is left, after erasing what it could", async () => {
  const node = placeNodeRoot(root);
  await populate(node);
  // The data directory replaced by a file: it cannot be listed, so neither emptied nor checked.
  await fs.rm(node.data.fullPath, { recursive: true });
  await fs.writeFile(node.data.fullPath, "not a directory");
  const error = await wipeNodeStorage(node).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WipeIncompleteError);
  expect(error).toMatchObject({
    remaining: [],
    failures: [expect.stringMatching(new RegExp(`^${node.data.fullPath}: ENOTDIR`))],
    message: expect.stringMatching(
      /^the wipe of the node's storage is incomplete: nothing is listed as remaining; errors: .*ENOTDIR.*; erase them by hand$/,
    ),
  });
  // The ESP was emptied all the same.
  expect(await fs.readdir(node.esp.fullPath)).toEqual([]);
});
