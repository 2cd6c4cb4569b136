/**
 * `metroctl cluster directory -o FILE` against a real curator leader (real
 * etcd, real mTLS): the file is the cluster directory as nodes keep it on
 * their ESP — readable by the node's own storage layout, the UP nodes with an
 * address sorted by ID, the consensus members marked, the exact bytes of
 * that message — with IDs, public keys and addresses only, mode 0644,
 * written atomically. A directory naming no curator with an address is
 * refused, writing nothing; so is a node whose ID is not its key's. What it
 * prints in text and JSON, and that help and completion list it.
 */
import { mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { directoryCurators } from "@metropolis/curator";
import { placeNodeRoot } from "@metropolis/localstorage";
import { common } from "@metropolis/proto";
import { checkedDirectory, type DirectoryView } from "../src/cluster-directory";
import { DirectoryWithoutCuratorError, TrustError } from "../src/errors";
import { clusterPerFile, metroctl, tempDir, type MetroctlCluster } from "./cluster-fixture";

let cluster: MetroctlCluster;
let config: string;

clusterPerFile((c, dir) => ((cluster = c), (config = dir)));

const oneErrorLine = (stderr: string) => {
  const lines = stderr.split("\n").filter((l) => l !== "");
  expect(lines).toHaveLength(1);
  return lines[0];
};

const status = (host: string) => common.NodeStatus.fromPartial({ externalAddress: host });
const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

describe("cluster directory", () => {
  it("refuses a directory without a curator that has an address, writing nothing", async () => {
    const { leader } = cluster;
    const first = leader.firstNode.nodeId;
    // The only consensus member has not reported its address yet (as a restored node just started).
    expect((await leader.getNode(first))?.status?.externalAddress ?? "").toBe("");
    const dir = await tempDir("directory");
    const file = join(dir, "cluster_directory.pb");
    const res = await metroctl(config, ["cluster", "directory", "-o", file]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.stderr)).toBe(
      `metroctl: cluster directory: no consensus member in the cluster's directory has reported its address yet (${first}): a node given it would find no curator; nothing written. Run it again once \`metroctl nodes\` shows their addresses`,
    );
    expect(await readdir(dir)).toEqual([]);
  });

  it("writes the leader's directory as nodes keep it: UP nodes with an address, by ID, curators marked", async () => {
    const { leader } = cluster;
    const first = leader.firstNode;
    // The first node reports its address, as a node's status push does.
    const firstAddress = "198.18.7.1";
    await leader.updateNode(first.nodeId, (n) => ({ ...n, status: status(firstAddress) }));
    const member = await leader.addNode({
      roles: { consensusMember: common.NodeRoles_ConsensusMember.create() },
      status: status("198.18.7.2"),
    });
    const worker = await leader.addNode({
      roles: { kubernetesWorker: {} },
      status: status("198.18.7.3"),
    });
    // Not in a node's directory: UP without an address, and not UP.
    await leader.addNode({ roles: { consensusMember: common.NodeRoles_ConsensusMember.create() } });
    await leader.addNode({ state: common.NodeState.STANDBY, status: status("198.18.7.5") });

    // Where a node keeps it, under a root of its own: the node's own layout reads it.
    const root = await tempDir("directory-root");
    const storage = placeNodeRoot(root);
    await storage.esp.metropolis.mkdirAll();
    const file = storage.esp.metropolis.clusterDirectory.fullPath;
    expect(file).toBe(join(root, "esp", "metropolis", "cluster_directory.pb"));
    // A stale directory of the old cluster there: replaced whole.
    await writeFile(file, common.ClusterDirectory.encode({ nodes: [] }).finish());
    const res = await metroctl(config, ["cluster", "directory", "-o", file]);
    expect(res).toMatchObject({ code: 0, stderr: "" });

    const expected: common.ClusterDirectory = {
      nodes: [
        { id: first.nodeId, pk: first.publicKey, host: firstAddress, consensusMember: true },
        { id: member.nodeId, pk: member.publicKey, host: "198.18.7.2", consensusMember: true },
        { id: worker.nodeId, pk: worker.publicKey, host: "198.18.7.3", consensusMember: false },
      ]
        .sort(byId)
        .map((n) => ({
          id: n.id,
          publicKey: Buffer.from(n.pk),
          addresses: [{ host: n.host }],
          consensusMember: n.consensusMember,
        })),
    };
    expect(await storage.esp.metropolis.clusterDirectory.read()).toEqual(expected);
    // The exact bytes of that message: nothing else in the file (no unknown fields, no secret).
    const bytes = await readFile(file);
    expect(bytes.equals(Buffer.from(common.ClusterDirectory.encode(expected).finish()))).toBe(true);
    // What a node dials from it: the two consensus members, each bound to its node.
    expect(directoryCurators(await storage.esp.metropolis.clusterDirectory.read(), 7835)).toEqual(
      expect.arrayContaining([
        { host: firstAddress, port: 7835, nodeId: first.nodeId },
        { host: "198.18.7.2", port: 7835, nodeId: member.nodeId },
      ]),
    );
    expect((await stat(file)).mode & 0o777).toBe(0o644);
    // Only the file: the temporary one was renamed over it.
    expect(await readdir(join(root, "esp", "metropolis"))).toEqual(["cluster_directory.pb"]);

    const curators = expected.nodes
      .filter((n) => n.consensusMember)
      .map((n) => `${n.id}@${n.addresses[0].host}`)
      .join(", ");
    expect(res.stdout).toBe(
      `cluster directory written to ${file}: 3 nodes, curators ${curators}; copy it to <root>/esp/metropolis/cluster_directory.pb of a node's machine before its node starts\n`,
    );

    const jsonFile = join(await tempDir("directory"), "d.pb");
    const json = await metroctl(config, [
      "cluster",
      "directory",
      "-o",
      jsonFile,
      "--format",
      "json",
    ]);
    expect(json).toMatchObject({ code: 0, stderr: "" });
    const view: DirectoryView = JSON.parse(json.stdout);
    expect(view).toEqual({
      file: jsonFile,
      nodes: expected.nodes.map((n) => ({
        id: n.id,
        publicKey: n.publicKey.toString("hex"),
        addresses: n.addresses.map((a) => a.host),
        consensusMember: n.consensusMember,
      })),
      curators: expected.nodes.filter((n) => n.consensusMember).map((n) => n.id),
    });
    expect((await readFile(jsonFile)).equals(bytes)).toBe(true);
  });

  it("leaves nothing behind when the file cannot be written", async () => {
    const dir = await tempDir("directory");
    const res = await metroctl(config, ["cluster", "directory", "-o", join(dir, "missing", "d")]);
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/ENOENT/);
    expect(await readdir(dir)).toEqual([]);
    // A directory in the way: refused, and nothing left next to it.
    await mkdir(join(dir, "taken"));
    const taken = await metroctl(config, ["cluster", "directory", "-o", join(dir, "taken")]);
    expect(taken.code).toBe(1);
    expect(await readdir(dir)).toEqual(["taken"]);
  });

  it("is listed in the help", async () => {
    const help = await metroctl(config, ["cluster", "--help"]);
    expect(`${help.stdout}${help.stderr}`).toMatch(
      /directory \[options\]\s+write the cluster directory/,
    );
    const completion = await metroctl(config, ["completion", "bash"]);
    expect(completion.stdout).toContain("'cluster directory'");
  });
});

describe("checkedDirectory", () => {
  const key = (byte: number) => Buffer.alloc(32, byte);
  const idOf = (byte: number) => `metropolis-${key(byte).subarray(0, 16).toString("hex")}`;
  const entry = (byte: number, host: string, consensusMember: boolean) => ({
    id: idOf(byte),
    publicKey: key(byte),
    addresses: host === "" ? [] : [{ host }],
    consensusMember,
  });

  it("refuses a directory without any consensus member", () => {
    expect(() => checkedDirectory({ nodes: [entry(1, "198.18.0.1", false)] })).toThrow(
      new DirectoryWithoutCuratorError(
        "the cluster's directory names no consensus member (1 UP nodes): a node given it would find no curator; nothing written",
      ),
    );
    expect(() => checkedDirectory(undefined)).toThrow(DirectoryWithoutCuratorError);
  });

  it("refuses a node whose ID is not its public key's, or whose key is not 32 bytes", () => {
    const wrong = { ...entry(2, "198.18.0.2", true), id: idOf(3) };
    expect(() => checkedDirectory({ nodes: [wrong] })).toThrow(
      new TrustError(
        `the cluster's directory lists node ${idOf(3)} with the public key of ${idOf(2)}`,
      ),
    );
    const short = { ...entry(4, "198.18.0.4", true), publicKey: Buffer.alloc(5) };
    expect(() => checkedDirectory({ nodes: [short] })).toThrow(
      new TrustError(
        `the cluster's directory lists node ${idOf(4)} with a 5-byte public key, not 32`,
      ),
    );
  });

  it("drops nodes without an address and sorts by ID", () => {
    const checked = checkedDirectory({
      nodes: [entry(9, "198.18.0.9", true), entry(5, "", true), entry(7, "198.18.0.7", false)],
    });
    expect(checked.nodes.map((n) => n.id)).toEqual([idOf(7), idOf(9)]);
  });
});
