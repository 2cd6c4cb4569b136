import { common } from "@metropolis/proto";
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import {
  dataDir,
  DataAlreadyInitializedError,
  DataPolicy,
  FileCorruptedError,
  file,
  placeNodeRoot,
} from "../src";
import { dataMarkerName } from "../src/data-protection";
import {
  DataAlreadyMountedError,
  DataNotInitializedError,
  DataNotMountedError,
  DataPolicyMismatchError,
  InvalidKeyError,
  InvalidTreeError,
  MissingUnlockKeyError,
  WrongDataKeyError,
} from "../src/errors";

let root: string;

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), "localstorage-data-"));
});

afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

const privateKey = Buffer.from("-----BEGIN PRIVATE KEY-----\nsecret material\n");
const roles = { consensusMember: common.NodeRoles_ConsensusMember.create() };

/** Sets up a node's data under `policy` with one secret and one public file; returns its keys. */
async function setUpNode(policy: DataPolicy) {
  const node = placeNodeRoot(root);
  const keys = await node.data.mountNew(policy);
  await node.data.node.credentials.key.write(privateKey);
  await node.data.node.roles.write(roles);
  return keys;
}

/** A fresh placement of the same root: what the node sees after a reboot. */
function reboot() {
  return placeNodeRoot(root);
}

describe("mountNew", () => {
  test("draws two independent 32-byte unlock keys and creates the data layout", async () => {
    const node = placeNodeRoot(root);
    const keys = await node.data.mountNew("encrypted");
    expect(keys.nodeUnlockKey).toHaveLength(32);
    expect(keys.clusterUnlockKey).toHaveLength(32);
    expect(keys.nodeUnlockKey.equals(keys.clusterUnlockKey)).toBe(false);
    expect(node.data.policy).toBe("encrypted");
    expect((await fs.stat(node.data.etcd.data.fullPath)).isDirectory()).toBe(true);
    expect((await fs.stat(path.join(node.data.fullPath, dataMarkerName))).isFile()).toBe(true);
  });

  test("under encrypted, secret files are AES-GCM ciphertext on disk, 0600, and read back", async () => {
    await setUpNode("encrypted");
    const node = reboot();
    const keyPath = node.data.node.credentials.key.fullPath;
    const onDisk = await fs.readFile(keyPath);
    expect(onDisk.includes("secret material")).toBe(false);
    expect(onDisk.subarray(0, 4).toString()).toBe("MTSF");
    expect((await fs.stat(keyPath)).mode & 0o777).toBe(0o600);
    // Files that are not secret stay plain, for readers outside this package.
    // Public files stay plain protobuf on disk.
    expect(common.NodeRoles.decode(await fs.readFile(node.data.node.roles.fullPath))).toEqual(
      common.NodeRoles.fromPartial(roles),
    );
  });

  test("refuses to set up over an existing node and leaves it intact", async () => {
    const keys = await setUpNode("encrypted");
    const node = reboot();
    await expect(node.data.mountNew("encrypted")).rejects.toThrow(DataAlreadyInitializedError);
    await expect(node.data.mountNew("insecure")).rejects.toThrow(/already holds a node/);
    expect(node.data.policy).toBeUndefined();
    await node.data.mountExisting({ policy: "encrypted", ...keys });
    expect((await node.data.node.credentials.key.read()).equals(privateKey)).toBe(true);
  });

  test("isInitialized() tells a node's data from none, mounted or not", async () => {
    const node = placeNodeRoot(root);
    expect(await node.data.isInitialized()).toBe(false);
    // An interrupted mountNew() leaves directories but no marker: still no node.
    await node.data.mkdirAll();
    expect(await node.data.isInitialized()).toBe(false);
    await node.data.mountNew("insecure");
    expect(await node.data.isInitialized()).toBe(true);
    expect(await reboot().data.isInitialized()).toBe(true);
  });

  test("rejects an unknown policy", async () => {
    const node = placeNodeRoot(root);
    await expect(node.data.mountNew("plaintext" as DataPolicy)).rejects.toThrow(RangeError);
  });
});

describe("mountExisting", () => {
  test("opens the data with NUK and CUK after a reboot", async () => {
    const keys = await setUpNode("encrypted");
    const node = reboot();
    await node.data.mountExisting({ policy: "encrypted", ...keys });
    expect(node.data.policy).toBe("encrypted");
    expect((await node.data.node.credentials.key.read()).equals(privateKey)).toBe(true);
    expect(await node.data.node.roles.read()).toEqual(common.NodeRoles.fromPartial(roles));
  });

  test("a wrong cluster unlock key is WrongDataKeyError at mount, and nothing is readable", async () => {
    const keys = await setUpNode("encrypted");
    const node = reboot();
    const wrong = Buffer.from(keys.clusterUnlockKey);
    wrong[0] ^= 1;
    await expect(
      node.data.mountExisting({ policy: "encrypted", ...keys, clusterUnlockKey: wrong }),
    ).rejects.toThrow(WrongDataKeyError);
    await expect(node.data.node.credentials.key.read()).rejects.toThrow(DataNotMountedError);
  });

  test("a missing unlock key is MissingUnlockKeyError; a short one InvalidKeyError", async () => {
    const keys = await setUpNode("encrypted");
    const node = reboot();
    await expect(
      node.data.mountExisting({ policy: "encrypted", nodeUnlockKey: keys.nodeUnlockKey }),
    ).rejects.toThrow(MissingUnlockKeyError);
    await expect(
      node.data.mountExisting({ policy: "encrypted", nodeUnlockKey: keys.nodeUnlockKey }),
    ).rejects.toThrow("the cluster unlock key is required");
    await expect(
      node.data.mountExisting({ policy: "encrypted", clusterUnlockKey: keys.clusterUnlockKey }),
    ).rejects.toThrow("the node unlock key is required");
    await expect(
      node.data.mountExisting({ policy: "encrypted", ...keys, clusterUnlockKey: Buffer.alloc(16) }),
    ).rejects.toThrow(InvalidKeyError);
  });

  test("a policy mismatch is an error, in both directions", async () => {
    const keys = await setUpNode("insecure");
    const node = reboot();
    await expect(node.data.mountExisting({ policy: "encrypted", ...keys })).rejects.toThrow(
      DataPolicyMismatchError,
    );
    await fs.rm(root, { recursive: true });
    const encryptedKeys = await setUpNode("encrypted");
    await expect(
      reboot().data.mountExisting({ policy: "insecure", ...encryptedKeys }),
    ).rejects.toThrow('uses policy "encrypted", but "insecure" was expected');
    await expect(
      reboot().data.mountExisting({ policy: "authenticated-encrypted", ...encryptedKeys }),
    ).rejects.toThrow(DataPolicyMismatchError);
  });

  test("a marker rewritten to insecure does not downgrade an encrypted node", async () => {
    const keys = await setUpNode("encrypted");
    const node = reboot();
    const markerPath = path.join(node.data.fullPath, dataMarkerName);
    const marker = JSON.parse(await fs.readFile(markerPath, "utf8")) as Record<string, unknown>;
    await fs.writeFile(markerPath, JSON.stringify({ ...marker, policy: "insecure" }));
    await expect(node.data.mountExisting({ policy: "encrypted", ...keys })).rejects.toThrow(
      DataPolicyMismatchError,
    );
  });

  test("a directory without a node is DataNotInitializedError", async () => {
    const node = placeNodeRoot(root);
    await expect(node.data.mountExisting({ policy: "insecure" })).rejects.toThrow(
      DataNotInitializedError,
    );
  });

  test("a corrupt marker is FileCorruptedError naming the marker", async () => {
    await setUpNode("encrypted");
    const node = reboot();
    const markerPath = path.join(node.data.fullPath, dataMarkerName);
    await fs.writeFile(markerPath, '{"format": "metropolis-ts data dir');
    await expect(node.data.mountExisting({ policy: "encrypted" })).rejects.toThrow(
      FileCorruptedError,
    );
    await expect(node.data.mountExisting({ policy: "encrypted" })).rejects.toThrow(markerPath);
  });

  test("a tampered secret file is FileCorruptedError naming it, never garbage", async () => {
    const keys = await setUpNode("encrypted");
    const node = reboot();
    await node.data.mountExisting({ policy: "encrypted", ...keys });
    const { key } = node.data.node.credentials;
    const onDisk = await fs.readFile(key.fullPath);
    onDisk[onDisk.length - 1] ^= 0x80;
    await fs.writeFile(key.fullPath, onDisk);
    await expect(key.read()).rejects.toThrow(FileCorruptedError);
    await expect(key.read()).rejects.toThrow(`${key.fullPath} is corrupted: authentication failed`);
    await fs.truncate(key.fullPath, 10);
    await expect(key.read()).rejects.toThrow(/truncated/);
  });

  test("a secret file copied over another is detected, not loaded as the wrong key", async () => {
    const keys = await setUpNode("encrypted");
    const node = reboot();
    await node.data.mountExisting({ policy: "encrypted", ...keys });
    await node.data.etcd.peerPKI.key.write(Buffer.from("peer key"));
    await fs.copyFile(node.data.etcd.peerPKI.key.fullPath, node.data.node.credentials.key.fullPath);
    await expect(node.data.node.credentials.key.read()).rejects.toThrow(FileCorruptedError);
  });

  test("authenticated-encrypted protects secrets the same way", async () => {
    const keys = await setUpNode("authenticated-encrypted");
    const node = reboot();
    expect(
      (await fs.readFile(node.data.node.credentials.key.fullPath)).includes("secret material"),
    ).toBe(false);
    await node.data.mountExisting({ policy: "authenticated-encrypted", ...keys });
    expect((await node.data.node.credentials.key.read()).equals(privateKey)).toBe(true);
  });
});

describe("insecure policy", () => {
  test("stores secrets plain and mounts without any key", async () => {
    await setUpNode("insecure");
    const node = reboot();
    expect(await fs.readFile(node.data.node.credentials.key.fullPath)).toEqual(privateKey);
    await node.data.mountExisting({ policy: "insecure" });
    expect((await node.data.node.credentials.key.read()).equals(privateKey)).toBe(true);
  });
});

describe("mount state", () => {
  test("files below an unmounted data directory are refused, other files are not", async () => {
    const node = placeNodeRoot(root);
    await node.esp.mkdirAll();
    await node.esp.metropolis.clusterDirectory.write({ nodes: [] });
    await expect(node.data.node.roles.read()).rejects.toThrow(DataNotMountedError);
    await expect(node.data.node.roles.write(roles)).rejects.toThrow(
      `${node.data.node.roles.fullPath} is on the data directory, which is not mounted`,
    );
    await expect(node.data.node.roles.exists()).rejects.toThrow(DataNotMountedError);
  });

  test("mounting twice is an error; unmount makes the data unreachable again", async () => {
    const keys = await setUpNode("encrypted");
    const node = reboot();
    await node.data.mountExisting({ policy: "encrypted", ...keys });
    await expect(node.data.mountExisting({ policy: "encrypted", ...keys })).rejects.toThrow(
      DataAlreadyMountedError,
    );
    node.data.unmount();
    expect(node.data.policy).toBeUndefined();
    await expect(node.data.node.credentials.key.read()).rejects.toThrow(DataNotMountedError);
  });
});

test("a declared child cannot take the marker's name", () => {
  expect(() => dataDir({ marker: file(dataMarkerName) })).toThrow(InvalidTreeError);
});
