/**
 * cluster.json: what is written is read back, a file that is not a local
 * cluster's state is refused with a StateFileError, and a write leaves no
 * temporary file behind.
 */
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readClusterState, writeClusterState } from "../src/cluster-state-file";
import { StateFileError } from "../src/errors";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "cluster-state-file-"));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const node1 = { name: "node1", address: "127.0.0.2", id: "metropolis-0a" };
const node2 = { name: "node2", address: "127.0.0.3", id: "metropolis-0b" };
const nodes = [node1, node2];

describe("cluster.json", () => {
  it("is absent for a new cluster, and reads back what was written", async () => {
    const path = join(dir, "cluster.json");
    expect(await readClusterState(path)).toBeUndefined();
    // Only the recorded fields are kept (a ClusterNode has more).
    const withRoot = { ...node1, root: "/elsewhere" };
    await writeClusterState(path, [withRoot, node2]);
    expect(await readClusterState(path)).toEqual({ version: 1, nodes });
    await writeClusterState(path, nodes);
    expect(await readClusterState(path)).toEqual({ version: 1, nodes });
    expect(await readdir(dir)).toEqual(["cluster.json"]);
  });

  it("refuses a file that is not a local cluster's state", async () => {
    const path = join(dir, "cluster.json");
    for (const text of [
      "not json",
      "{}",
      JSON.stringify({ version: 2, nodes }),
      JSON.stringify({ version: 1, nodes: [] }),
      JSON.stringify({ version: 1, nodes: [{ name: "node1", address: "127.0.0.2", id: "x" }] }),
    ]) {
      await writeFile(path, text);
      await expect(readClusterState(path)).rejects.toThrow(StateFileError);
    }
  });
});
