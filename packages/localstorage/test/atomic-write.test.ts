import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { atomicWriteFile, isTemporaryName, removeStaleTemporaries } from "../src/atomic-write";

let root: string;

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), "localstorage-atomic-"));
});

afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

test("a write that fails before its rename removes its temporary file and keeps the target", async () => {
  const target = path.join(root, "roles.pb");
  await atomicWriteFile(target, Buffer.from("old"));
  let seen: string | undefined;
  await expect(
    atomicWriteFile(target, Buffer.from("new"), {
      beforeRename: (temporaryPath) => {
        seen = temporaryPath;
        throw new Error("disk full");
      },
    }),
  ).rejects.toThrow("disk full");
  expect(seen).toBeDefined();
  expect(isTemporaryName(path.basename(seen!))).toBe(true);
  expect(await fs.readFile(target, "utf8")).toBe("old");
  expect(await fs.readdir(root)).toEqual(["roles.pb"]);
});

test("temporary names are told apart from data names", () => {
  expect(isTemporaryName(".roles.pb.tmp-0123456789abcdef")).toBe(true);
  expect(isTemporaryName("roles.pb")).toBe(false);
  expect(isTemporaryName(".metropolis-data.json")).toBe(false);
  expect(isTemporaryName("roles.pb.tmp-0123456789abcdef")).toBe(false);
});

test("removeStaleTemporaries removes only temporary files, and tolerates a missing directory", async () => {
  await fs.writeFile(path.join(root, "roles.pb"), "data");
  await fs.writeFile(path.join(root, ".roles.pb.tmp-0123456789abcdef"), "partial");
  expect(await removeStaleTemporaries(root)).toEqual([
    path.join(root, ".roles.pb.tmp-0123456789abcdef"),
  ]);
  expect(await fs.readdir(root)).toEqual(["roles.pb"]);
  expect(await removeStaleTemporaries(path.join(root, "missing"))).toEqual([]);
});
