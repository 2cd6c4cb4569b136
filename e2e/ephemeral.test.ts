/**
 * e2e ephemeral: a node's secrets rest on its disk only in encrypted form.
 * A real one-node cluster (`metropolis-node` with its etcd member) keeps its
 * ephemeral directory — where etcd reads its peer key in plain text — in
 * memory: a tmpfs when it runs as root and may mount one, else a private
 * directory under /dev/shm behind a symlink. A SIGKILLed node leaves that
 * memory behind; its next start clears it (no second mount, no second
 * directory). After a graceful stop nothing is left in memory, and every
 * file under the node's root is scanned: no PEM private key block, and
 * neither the node's private key (raw seed, PKCS#8 DER, or the base64 of a
 * PEM body) nor its join key, which the test learns by unsealing the node's
 * configuration and mounting its data as the node does.
 */
import { readFileSync } from "node:fs";
import { lstat, readdir, readFile, realpath } from "node:fs/promises";
import { join } from "node:path";
import { readSealedConfiguration } from "@metropolis/cluster";
import { defaultMemoryDir, memoryDirPrefix, placeNodeRoot } from "@metropolis/localstorage";
import { privateKeyFromPkcs8, privateKeyToPkcs8 } from "@metropolis/pki";
import { common } from "@metropolis/proto";
import { E2eCluster } from "./e2e-cluster";

jest.setTimeout(180_000);

/** How many mounts /proc/self/mountinfo lists on `mountPoint`. */
function mounts(mountPoint: string): number {
  const text = readFileSync("/proc/self/mountinfo", "utf8");
  return text.split("\n").filter((line) => line.split(" ")[4] === mountPoint).length;
}

/** The node's private directories under /dev/shm (the fallback placement), as full paths. */
async function memoryDirs(ephemeral: string): Promise<string[]> {
  const prefix = memoryDirPrefix(ephemeral);
  return (await readdir(defaultMemoryDir))
    .filter((name) => name.startsWith(prefix))
    .map((name) => join(defaultMemoryDir, name));
}

/** Where the running node's ephemeral directory is: a tmpfs on it, or the /dev/shm directory it links to. */
async function placement(ephemeral: string): Promise<string> {
  if ((await lstat(ephemeral)).isSymbolicLink()) {
    const target = await realpath(ephemeral);
    expect(await memoryDirs(ephemeral)).toEqual([target]);
    expect(mounts(ephemeral)).toBe(0);
    return target;
  }
  expect(mounts(ephemeral)).toBe(1);
  expect(await memoryDirs(ephemeral)).toEqual([]);
  return "tmpfs";
}

/** Every regular file under `dir`, symlinks not followed. */
async function regularFiles(dir: string): Promise<string[]> {
  const files: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...(await regularFiles(path)));
    else if (entry.isFile()) files.push(path);
  }
  return files;
}

// The node's default (a tmpfs, as it runs as root here when the container allows mounts),
// and the /dev/shm fallback, which a node not running as root always takes.
describe.each([
  ["default", "ephemeral", {}],
  ["ephemeralTmpfs: false", "ephemeral-shm", { ephemeralTmpfs: false }],
])(
  "ephemeral (%s): secrets of a running node never rest on its disk",
  (_config, name, nodeConfig) => {
    let e2e: E2eCluster;

    beforeAll(async () => {
      // Short: the node's etcd socket lies under this temp dir, and a socket path is at most 107 bytes.
      e2e = await E2eCluster.create(name, {
        nodes: 1,
        nodeConfig,
      });
      await e2e.up();
    });

    afterAll(async () => {
      await e2e?.teardown();
    });

    it("keeps ephemeral/ in memory, clears a killed run's, and leaves no key material after a graceful stop", async () => {
      const node = e2e.node(1);
      const ephemeral = join(node.root, "ephemeral");
      const peerKeyPath = join(ephemeral, "consensus", "peer-key.pem");

      // Running: etcd's plain peer key is there, in memory.
      const first = await placement(ephemeral);
      if ("ephemeralTmpfs" in nodeConfig) expect(first).not.toBe("tmpfs");
      const peerKey = privateKeyFromPkcs8(await readFile(peerKeyPath, "utf8"));
      e2e.cluster.record(`ephemeral placement: ${first === "tmpfs" ? "tmpfs" : "/dev/shm"}`, 0);

      // Power cut: the memory stays until the next start, which clears it.
      await e2e.cluster.killNode(node);
      expect(await placement(ephemeral)).toBe(first);
      await e2e.measure("node1 UP and HEALTHY after SIGKILL and start", async () => {
        const proc = e2e.cluster.startNode(node);
        await proc.waitForProgress("cluster.enrolled", 60_000, {
          where: (e) => e.flow === "rejoin",
        });
        await e2e.cluster.waitFor(node, { state: "UP", health: "HEALTHY" }, 60_000);
      });
      const second = await placement(ephemeral);
      if (first !== "tmpfs") expect(second).not.toBe(first);

      // Graceful stop: the memory is given back.
      await e2e.measure("node1 graceful stop (SIGTERM)", () => e2e.cluster.stopNode(node));
      expect(node.process!.exit).toEqual({ code: 0, signal: null });
      expect(mounts(ephemeral)).toBe(0);
      expect(await memoryDirs(ephemeral)).toEqual([]);
      const left = await lstat(ephemeral).catch(() => undefined);
      if (left) {
        expect(left.isDirectory()).toBe(true);
        expect(await readdir(ephemeral)).toEqual([]);
      }

      // The keys the node holds, learnt as the node learns them at start.
      const storage = placeNodeRoot(node.root);
      const sealed = await readSealedConfiguration(storage, join(node.root, "machine.key"));
      expect(sealed?.storagePolicy).toBe(common.StoragePolicy.ENCRYPTED);
      await storage.data.mountExisting({
        policy: "encrypted",
        nodeUnlockKey: sealed!.nodeUnlockKey,
        clusterUnlockKey: sealed!.clusterUnlockKey,
      });
      const nodeKey = await storage.data.node.credentials.key.read();
      storage.data.unmount();
      expect(nodeKey.equals(peerKey)).toBe(true); // etcd's peer key is the node's own key
      const pkcs8 = privateKeyToPkcs8(nodeKey);
      const needles: Array<[string, Buffer]> = [
        ["a PEM private key block", Buffer.from("PRIVATE KEY-----")],
        ["the node's private key (raw seed)", nodeKey],
        ["the node's private key (PKCS#8 DER)", pkcs8],
        ["the node's private key (PEM body)", Buffer.from(pkcs8.toString("base64").slice(0, 48))],
        ["the node's join key (raw seed)", Buffer.from(sealed!.joinKey)],
      ];

      const files = await regularFiles(node.root);
      expect(files.length).toBeGreaterThan(10); // the scan saw the node's files, etcd's included
      expect(files.some((f) => f.includes(join("data", "etcd", "data")))).toBe(true);
      const found: string[] = [];
      for (const file of files) {
        const content = await readFile(file);
        for (const [what, needle] of needles) {
          if (content.includes(needle)) found.push(`${file}: ${what}`);
        }
      }
      expect(found).toEqual([]);
    });
  },
);
