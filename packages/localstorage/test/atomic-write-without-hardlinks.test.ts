// A real ESP is FAT, which has no hard links: link() fails with EPERM there.
// Exclusive writes must then still commit, and still refuse to replace.
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { atomicWriteFile } from "../src/atomic-write";
import { FileExistsError } from "../src/errors";

// Hoisted above the imports by @swc/jest, so atomic-write sees the mock too.
jest.mock("node:fs/promises", () => {
  const actual = jest.requireActual<typeof import("node:fs/promises")>("node:fs/promises");
  return {
    ...actual,
    link: jest.fn(async () => {
      throw Object.assign(new Error("EPERM: operation not permitted, link"), { code: "EPERM" });
    }),
  };
});

let root: string;

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), "localstorage-nolink-"));
});

afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

test("an exclusive write commits without hard links and still never replaces", async () => {
  const target = path.join(root, "sealed_configuration.pb");
  await atomicWriteFile(target, Buffer.from("first"), { exclusive: true });
  expect(jest.mocked(fs.link)).toHaveBeenCalled();
  expect(await fs.readFile(target, "utf8")).toBe("first");

  await expect(atomicWriteFile(target, Buffer.from("second"), { exclusive: true })).rejects.toThrow(
    FileExistsError,
  );
  expect(await fs.readFile(target, "utf8")).toBe("first");
  expect(await fs.readdir(root)).toEqual(["sealed_configuration.pb"]);
});
