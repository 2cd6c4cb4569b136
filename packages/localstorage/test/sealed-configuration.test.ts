import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import {
  ensureMachineKey,
  FileCorruptedError,
  placeNodeRoot,
  sealConfiguration,
  SealedCorruptedError,
  unsealConfiguration,
} from "../src";
import { FileMissingError, SealedConfigurationExistsError } from "../src/errors";

let machine: string;

beforeEach(async () => {
  machine = await fs.mkdtemp(path.join(os.tmpdir(), "localstorage-sealed-"));
});

afterEach(async () => {
  await fs.rm(machine, { recursive: true, force: true });
});

const configuration = Buffer.from("node unlock key and the rest of SealedConfiguration");

/** A node whose machine key lives outside its root (and so outside its ESP). */
async function makeNode(name = "node") {
  const node = placeNodeRoot(path.join(machine, name, "root"));
  await node.esp.mkdirAll();
  return {
    sealed: node.esp.metropolis.sealedConfiguration,
    machineKeyPath: path.join(machine, name, "machine", "key"),
  };
}

test("sealing encrypts under a machine key created 0600 on first use, and unsealing recovers it", async () => {
  const { sealed, machineKeyPath } = await makeNode();
  await sealConfiguration(sealed, configuration, { machineKeyPath });

  expect((await fs.stat(machineKeyPath)).mode & 0o777).toBe(0o600);
  expect((await fs.stat(machineKeyPath)).size).toBe(32);
  expect((await fs.stat(sealed.fullPath)).mode & 0o777).toBe(0o600);
  expect((await fs.readFile(sealed.fullPath)).includes("node unlock key")).toBe(false);
  expect((await unsealConfiguration(sealed, { machineKeyPath })).equals(configuration)).toBe(true);
});

test("an existing sealed configuration is only replaced when asked to", async () => {
  const { sealed, machineKeyPath } = await makeNode();
  await sealConfiguration(sealed, configuration, { machineKeyPath });

  await expect(
    sealConfiguration(sealed, Buffer.from("another"), { machineKeyPath }),
  ).rejects.toThrow(SealedConfigurationExistsError);
  await expect(
    sealConfiguration(sealed, Buffer.from("another"), { machineKeyPath, overwrite: false }),
  ).rejects.toThrow("pass { overwrite: true }");
  expect((await unsealConfiguration(sealed, { machineKeyPath })).equals(configuration)).toBe(true);

  await sealConfiguration(sealed, Buffer.from("another"), { machineKeyPath, overwrite: true });
  expect((await unsealConfiguration(sealed, { machineKeyPath })).toString()).toBe("another");
});

test("an ESP copied to a machine without the key is SealedCorruptedError", async () => {
  const { sealed, machineKeyPath } = await makeNode();
  await sealConfiguration(sealed, configuration, { machineKeyPath });
  const elsewhere = path.join(machine, "other-machine", "key");

  await expect(unsealConfiguration(sealed, { machineKeyPath: elsewhere })).rejects.toThrow(
    SealedCorruptedError,
  );
  await expect(unsealConfiguration(sealed, { machineKeyPath: elsewhere })).rejects.toThrow(
    `there is no machine key at ${elsewhere}`,
  );
  // Unsealing must not create a key: that would only hide the problem.
  await expect(fs.stat(elsewhere)).rejects.toThrow(/ENOENT/);
});

test("an ESP copied to a machine with another key is SealedCorruptedError", async () => {
  const first = await makeNode("first");
  const second = await makeNode("second");
  await sealConfiguration(first.sealed, configuration, { machineKeyPath: first.machineKeyPath });
  await sealConfiguration(second.sealed, configuration, { machineKeyPath: second.machineKeyPath });

  await expect(
    unsealConfiguration(first.sealed, { machineKeyPath: second.machineKeyPath }),
  ).rejects.toThrow(SealedCorruptedError);
});

test("a corrupt sealed configuration is SealedCorruptedError naming it", async () => {
  const { sealed, machineKeyPath } = await makeNode();
  await sealConfiguration(sealed, configuration, { machineKeyPath });
  const bytes = await fs.readFile(sealed.fullPath);

  bytes[bytes.length - 1] ^= 1;
  await fs.writeFile(sealed.fullPath, bytes);
  await expect(unsealConfiguration(sealed, { machineKeyPath })).rejects.toThrow(
    SealedCorruptedError,
  );
  await expect(unsealConfiguration(sealed, { machineKeyPath })).rejects.toThrow(sealed.fullPath);

  await fs.writeFile(sealed.fullPath, bytes.subarray(0, 20));
  await expect(unsealConfiguration(sealed, { machineKeyPath })).rejects.toThrow(/truncated/);

  await fs.writeFile(sealed.fullPath, "not sealed at all, but long enough to have a header");
  await expect(unsealConfiguration(sealed, { machineKeyPath })).rejects.toThrow(/wrong magic/);
});

test("a missing sealed configuration is FileMissingError", async () => {
  const { sealed, machineKeyPath } = await makeNode();
  await expect(unsealConfiguration(sealed, { machineKeyPath })).rejects.toThrow(FileMissingError);
});

test("a machine key of the wrong size is FileCorruptedError naming it, for sealing and unsealing", async () => {
  const { sealed, machineKeyPath } = await makeNode();
  await sealConfiguration(sealed, configuration, { machineKeyPath });
  await fs.writeFile(machineKeyPath, "short");

  await expect(unsealConfiguration(sealed, { machineKeyPath })).rejects.toThrow(FileCorruptedError);
  await expect(
    sealConfiguration(sealed, configuration, { machineKeyPath, overwrite: true }),
  ).rejects.toThrow(machineKeyPath);
});

test("ensureMachineKey() creates the key on first use, keeps it after, and refuses a corrupt one by name", async () => {
  const { sealed, machineKeyPath } = await makeNode();
  await ensureMachineKey(machineKeyPath);
  const key = await fs.readFile(machineKeyPath);
  expect(key).toHaveLength(32);
  expect((await fs.stat(machineKeyPath)).mode & 0o777).toBe(0o600);
  await ensureMachineKey(machineKeyPath);
  expect((await fs.readFile(machineKeyPath)).equals(key)).toBe(true);
  // What enrolment seals with afterwards is that same key.
  await sealConfiguration(sealed, configuration, { machineKeyPath });
  expect((await fs.readFile(machineKeyPath)).equals(key)).toBe(true);

  await fs.writeFile(machineKeyPath, Buffer.alloc(7));
  const error = await ensureMachineKey(machineKeyPath).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(FileCorruptedError);
  expect((error as Error).message).toContain(machineKeyPath);
});
