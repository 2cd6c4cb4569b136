import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { FileCorruptedError, placeNodeRoot, sealConfiguration, unsealConfiguration } from "../src";
import { nodeRoot } from "../src/node-root";
import { NotPlacedError } from "../src/errors";

let root: string;

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), "localstorage-node-"));
});

afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

test("the node layout has the reference paths", () => {
  const node = placeNodeRoot(root);
  const relative = (fullPath: string) => path.relative(root, fullPath);
  expect(
    [
      node.esp.metropolis.parameters,
      node.esp.metropolis.sealedConfiguration,
      node.esp.metropolis.clusterDirectory,
      node.data.etcd.peerPKI.caCertificate,
      node.data.etcd.peerPKI.certificate,
      node.data.etcd.peerPKI.key,
      node.data.etcd.peerCRL,
      node.data.etcd.data,
      node.data.node.credentials.caCertificate,
      node.data.node.credentials.certificate,
      node.data.node.credentials.key,
      node.data.node.roles,
      node.data.workloads,
      node.ephemeral.consensus,
      node.ephemeral.curator,
      node.ephemeral.workloads,
    ].map((entry) => relative(entry.fullPath)),
  ).toEqual([
    "esp/metropolis/parameters.pb",
    "esp/metropolis/sealed_configuration.pb",
    "esp/metropolis/cluster_directory.pb",
    "data/etcd/peer_pki/ca.pem",
    "data/etcd/peer_pki/cert.pem",
    "data/etcd/peer_pki/cert-key.pem",
    "data/etcd/peer_crl",
    "data/etcd/data",
    "data/node/credentials/ca.pem",
    "data/node/credentials/cert.pem",
    "data/node/credentials/cert-key.pem",
    "data/node/roles.pb",
    "data/workloads",
    "ephemeral/consensus",
    "ephemeral/curator",
    "ephemeral/workloads",
  ]);
  // Only the private keys are secret.
  expect(node.data.etcd.peerPKI.key.secret).toBe(true);
  expect(node.data.node.credentials.key.secret).toBe(true);
  expect(node.data.node.credentials.certificate.secret).toBe(false);
});

test("nodeRoot() declares a fresh, unplaced tree each time", () => {
  const placed = placeNodeRoot(root);
  const fresh = nodeRoot();
  expect(fresh).not.toBe(placed);
  expect(() => fresh.esp.fullPath).toThrow(NotPlacedError);
});

test("wiping ephemeral empties it and recreates its directories, touching nothing else", async () => {
  const node = placeNodeRoot(root);
  await node.esp.mkdirAll();
  await node.esp.metropolis.clusterDirectory.write({
    nodes: [{ id: "n1", publicKey: Buffer.alloc(32), addresses: [], consensusMember: false }],
  });
  await node.ephemeral.wipe();
  expect((await fs.readdir(node.ephemeral.fullPath)).sort()).toEqual([
    "consensus",
    "curator",
    "workloads",
  ]);

  await fs.writeFile(path.join(node.ephemeral.consensus.fullPath, "etcd.sock"), "");
  await fs.mkdir(path.join(node.ephemeral.workloads.fullPath, "pod", "rootfs"), {
    recursive: true,
  });
  await fs.writeFile(path.join(node.ephemeral.fullPath, "stray"), "");
  const before = await fs.stat(node.ephemeral.fullPath);
  await node.ephemeral.wipe();

  expect((await fs.readdir(node.ephemeral.fullPath)).sort()).toEqual([
    "consensus",
    "curator",
    "workloads",
  ]);
  expect(await fs.readdir(node.ephemeral.consensus.fullPath)).toEqual([]);
  expect(await fs.readdir(node.ephemeral.workloads.fullPath)).toEqual([]);
  // The directory itself stays (it may be a mount point), as does the rest of the root.
  expect((await fs.stat(node.ephemeral.fullPath)).ino).toBe(before.ino);
  expect((await node.esp.metropolis.clusterDirectory.read()).nodes.map((n) => n.id)).toEqual([
    "n1",
  ]);
});

test("protobuf files are read decoded, and a file that does not parse names itself", async () => {
  const node = placeNodeRoot(root);
  await node.esp.mkdirAll();
  const parameters = node.esp.metropolis.parameters;
  await parameters.write({
    cluster: {
      $case: "clusterBootstrap",
      clusterBootstrap: { ownerPublicKey: Buffer.alloc(32, 7), labels: new Map([["a", "b"]]) },
    },
  });
  const read = await parameters.read();
  expect(read.cluster?.$case).toBe("clusterBootstrap");

  for (const garbage of [
    Buffer.alloc(0),
    Buffer.from([0x0a, 0xff, 0xff, 0xff, 0x0f]),
    Buffer.from("\xff\xff\xff"),
  ]) {
    await fs.writeFile(parameters.fullPath, garbage);
    await expect(parameters.read()).rejects.toBeInstanceOf(FileCorruptedError);
    await expect(parameters.read()).rejects.toThrow(parameters.fullPath);
  }
});

test("first boot and reboot: set up encrypted data, seal the NUK, unseal it and mount again", async () => {
  const machineKeyPath = path.join(root, "machine-key");
  const nodePath = path.join(root, "node");
  const privateKey = Buffer.from("node private key");

  // First boot: the enrolment manager sets up a new node.
  const first = placeNodeRoot(nodePath);
  await first.ephemeral.wipe();
  await first.esp.mkdirAll();
  const { nodeUnlockKey, clusterUnlockKey } = await first.data.mountNew("encrypted");
  await first.data.node.credentials.key.write(privateKey);
  await sealConfiguration(first.esp.metropolis.sealedConfiguration, nodeUnlockKey, {
    machineKeyPath,
  });

  // Reboot: the NUK comes from the ESP, the CUK from the cluster.
  const second = placeNodeRoot(nodePath);
  await second.ephemeral.wipe();
  const unsealed = await unsealConfiguration(second.esp.metropolis.sealedConfiguration, {
    machineKeyPath,
  });
  await second.data.mountExisting({
    policy: "encrypted",
    nodeUnlockKey: unsealed,
    clusterUnlockKey,
  });
  expect((await second.data.node.credentials.key.read()).equals(privateKey)).toBe(true);
});
