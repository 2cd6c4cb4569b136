import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { Codec, dir, file, FileCorruptedError, place } from "../src";
import { Directory, populate } from "../src/tree";
import {
  FileExistsError,
  FileMissingError,
  InvalidTreeError,
  NotPlacedError,
  PlacementError,
} from "../src/errors";

let root: string;

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), "localstorage-tree-"));
});

afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

/** A strict codec in the manner of a protobuf decoder: a length prefix that must match. */
const lengthPrefixed: Codec<string> = {
  encode(value) {
    const body = Buffer.from(value, "utf8");
    return Buffer.concat([Buffer.of(body.length), body]);
  },
  decode(bytes) {
    if (bytes.length === 0 || bytes[0] !== bytes.length - 1) {
      throw new Error(`length prefix says ${bytes[0]}, ${bytes.length - 1} bytes follow`);
    }
    return bytes.subarray(1).toString("utf8");
  },
};

function declareLayout() {
  return dir({
    esp: dir({
      metropolis: dir({
        parameters: file("parameters.pb", { codec: lengthPrefixed }),
        blob: file("blob.bin"),
      }),
    }),
    peerPKI: dir({ certificate: file("cert.pem") }, { name: "peer_pki" }),
  });
}

describe("declaration", () => {
  test("property names give typed access, on-disk names give paths", () => {
    const tree = place(declareLayout(), root);
    expect(tree.fullPath).toBe(root);
    expect(tree.esp.metropolis.fullPath).toBe(path.join(root, "esp", "metropolis"));
    expect(tree.esp.metropolis.parameters.fullPath).toBe(
      path.join(root, "esp", "metropolis", "parameters.pb"),
    );
    expect(tree.peerPKI.name).toBe("peer_pki");
    expect(tree.peerPKI.certificate.fullPath).toBe(path.join(root, "peer_pki", "cert.pem"));
  });

  test("rejects empty names", () => {
    expect(() => file("")).toThrow(InvalidTreeError);
    expect(() => dir({}, { name: "" })).toThrow(InvalidTreeError);
    expect(() => dir({ "": file("a") })).toThrow(InvalidTreeError);
  });

  test("rejects names containing a slash, and . and ..", () => {
    expect(() => file("a/b")).toThrow(/contains a slash/);
    expect(() => dir({}, { name: "a/b" })).toThrow(InvalidTreeError);
    expect(() => dir({ "a/b": dir({}) })).toThrow(InvalidTreeError);
    expect(() => file("..")).toThrow(InvalidTreeError);
  });

  test("rejects two children with the same on-disk name", () => {
    expect(() => dir({ a: file("same"), b: file("same") })).toThrow(/two children are named/);
    expect(() => dir({ same: dir({}), other: dir({}, { name: "same" }) })).toThrow(
      InvalidTreeError,
    );
  });

  test("rejects a property name that would shadow a directory member", () => {
    const untyped = dir as (children: Record<string, unknown>) => unknown;
    expect(() => untyped({ fullPath: file("x") })).toThrow(/shadow/);
    expect(() => untyped({ mkdirAll: dir({}) })).toThrow(/shadow/);
    expect(() => untyped({ constructor: dir({}) })).toThrow(/shadow/);
  });

  test("rejects a node used in two places and a child that is not a node", () => {
    const shared = file("x");
    dir({ a: shared });
    expect(() => dir({ b: shared })).toThrow(/already part of a tree/);
    const untyped = dir as (children: Record<string, unknown>) => unknown;
    expect(() => untyped({ a: "x" })).toThrow(/not a dir\(\) or file\(\)/);
  });
  test("a rejected declaration leaves its would-be children free", () => {
    const child = file("a");
    expect(() => dir({ first: child, second: file("a") })).toThrow(InvalidTreeError);
    expect(dir({ child }).child).toBe(child);
  });

  test("rejects a directory containing itself", () => {
    const inner = new Directory();
    const outer = dir({ inner });
    expect(() => populate(inner, { outer })).toThrow(/cannot contain itself/);
    const lone = new Directory();
    expect(() => populate(lone, { lone })).toThrow(/cannot contain itself/);
  });
});

describe("placement", () => {
  test("placing twice is an error", () => {
    const tree = place(declareLayout(), root);
    expect(() => place(tree, root)).toThrow(PlacementError);
    expect(() => place(tree, path.join(root, "elsewhere"))).toThrow(/already placed at/);
  });

  test("only a root can be placed, and only at an absolute path", () => {
    const tree = declareLayout();
    expect(() => place(tree.esp, root)).toThrow(/only the root/);
    expect(() => place(tree, "relative/path")).toThrow(/not absolute/);
  });

  test("fullPath before placement is NotPlacedError naming the node", () => {
    const tree = declareLayout();
    expect(() => tree.esp.metropolis.parameters.fullPath).toThrow(NotPlacedError);
    expect(() => tree.esp.metropolis.parameters.fullPath).toThrow(
      "esp/metropolis/parameters.pb is not placed",
    );
  });

  test("a placed tree cannot be declared as a child", () => {
    const placed = place(dir({}), root);
    expect(() => dir({ sub: placed })).toThrow(InvalidTreeError);
  });
});

describe("files", () => {
  test("mkdirAll creates the directory and every declared directory below it", async () => {
    const tree = place(declareLayout(), path.join(root, "deep", "root"));
    await tree.mkdirAll();
    expect((await fs.stat(tree.esp.metropolis.fullPath)).isDirectory()).toBe(true);
    expect((await fs.stat(tree.peerPKI.fullPath)).isDirectory()).toBe(true);
  });

  test("write then read round-trips through the codec", async () => {
    const tree = place(declareLayout(), root);
    await tree.mkdirAll();
    const { parameters, blob } = tree.esp.metropolis;
    expect(await parameters.exists()).toBe(false);
    await parameters.write("cluster parameters");
    await blob.write(Buffer.from([1, 2, 3]));
    expect(await parameters.exists()).toBe(true);
    expect(await parameters.read()).toBe("cluster parameters");
    expect([...(await blob.read())]).toEqual([1, 2, 3]);
    // The codec's encoding is what is on disk.
    expect((await fs.readFile(parameters.fullPath))[0]).toBe("cluster parameters".length);
  });

  test("write replaces the content and leaves no temporary files", async () => {
    const tree = place(declareLayout(), root);
    await tree.mkdirAll();
    const { blob } = tree.esp.metropolis;
    await blob.write(Buffer.from("first, and longer"));
    await blob.write(Buffer.from("second"));
    expect((await blob.read()).toString()).toBe("second");
    expect(await fs.readdir(tree.esp.metropolis.fullPath)).toEqual(["blob.bin"]);
  });

  test("write sets the requested mode exactly, regardless of the umask", async () => {
    const tree = place(declareLayout(), root);
    await tree.mkdirAll();
    const { blob } = tree.esp.metropolis;
    const umask = process.umask(0o077);
    try {
      await blob.write(Buffer.from("x"));
      expect((await fs.stat(blob.fullPath)).mode & 0o777).toBe(0o644);
      await blob.write(Buffer.from("x"), { mode: 0o640 });
      expect((await fs.stat(blob.fullPath)).mode & 0o777).toBe(0o640);
    } finally {
      process.umask(umask);
    }
  });

  test("reading a missing file is FileMissingError naming the path", async () => {
    const tree = place(declareLayout(), root);
    const { parameters } = tree.esp.metropolis;
    await expect(parameters.read()).rejects.toThrow(FileMissingError);
    await expect(parameters.read()).rejects.toThrow(`${parameters.fullPath} does not exist`);
  });

  test("a truncated file is FileCorruptedError naming the path, never a value", async () => {
    const tree = place(declareLayout(), root);
    await tree.mkdirAll();
    const { parameters } = tree.esp.metropolis;
    await parameters.write("cluster parameters");
    await fs.truncate(parameters.fullPath, 5);
    const error: unknown = await parameters.read().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FileCorruptedError);
    expect((error as FileCorruptedError).path).toBe(parameters.fullPath);
    expect((error as Error).message).toContain(parameters.fullPath);
    expect((error as Error).message).toContain("length prefix says");
  });

  test("an empty file is corrupt to a codec that rejects it", async () => {
    const tree = place(declareLayout(), root);
    await tree.mkdirAll();
    const { parameters } = tree.esp.metropolis;
    await fs.writeFile(parameters.fullPath, "");
    await expect(parameters.read()).rejects.toThrow(FileCorruptedError);
  });

  test("as() reads and writes the same file through another codec", async () => {
    const tree = place(declareLayout(), root);
    await tree.mkdirAll();
    const typed = tree.esp.metropolis.blob.as(lengthPrefixed);
    expect(typed.fullPath).toBe(tree.esp.metropolis.blob.fullPath);
    await typed.write("hello");
    expect((await tree.esp.metropolis.blob.read()).subarray(1).toString()).toBe("hello");
    expect(await typed.read()).toBe("hello");
    expect(() => dir({ again: typed })).toThrow(/view/);
  });

  test("an exclusive write never replaces an existing file", async () => {
    const tree = place(declareLayout(), root);
    await tree.mkdirAll();
    const { blob } = tree.esp.metropolis;
    await blob.write(Buffer.from("first"), { exclusive: true });
    await expect(blob.write(Buffer.from("second"), { exclusive: true })).rejects.toThrow(
      FileExistsError,
    );
    expect((await blob.read()).toString()).toBe("first");
    expect(await fs.readdir(tree.esp.metropolis.fullPath)).toEqual(["blob.bin"]);
  });

  test("a secret file outside any data directory is refused", async () => {
    const tree = place(dir({ key: file("key.pem", { secret: true }) }), root);
    await expect(tree.key.write(Buffer.from("k"))).rejects.toThrow(/not below a data directory/);
    await expect(tree.key.read()).rejects.toThrow(InvalidTreeError);
  });
});
