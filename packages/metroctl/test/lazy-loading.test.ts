/**
 * What a run of metroctl loads: `--help`, `completion` and `version` answer
 * from the command table alone, without grpc-js, the protobuf code, x509 or
 * the CEL engine; a command loads what it needs when it runs (`nodes
 * --filter` the CEL engine, `nodes` without one not). Each run is a fresh
 * process on tsc's output (dist/, built by `tsc -b` before jest), whose
 * module cache is read when it exits. The bundle runs the same code
 * (bundle.test.ts).
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { status } from "@grpc/grpc-js";
import { grpcStatusNames } from "../src/failure-message";

const main = resolve(__dirname, "..", "dist", "main.js");

/** What each heavy dependency's files look like in a module cache. */
const heavy: Record<string, RegExp> = {
  "grpc-js": /[\\/]node_modules[\\/]@grpc[\\/]grpc-js[\\/]/,
  "protobuf code": /[\\/]proto[\\/]dist[\\/]/,
  x509: /[\\/]node_modules[\\/]@peculiar[\\/]x509[\\/]/,
  CEL: /[\\/]node_modules[\\/]@marcbachmann[\\/]cel-js[\\/]/,
};

/** Runs dist/main.js with `args`; resolves with its exit code, stdout and the heavy dependencies it loaded. */
function run(args: string[]): Promise<{ code: number; stdout: string; loaded: string[] }> {
  const script = `
    process.argv = [process.execPath, ${JSON.stringify(main)}, ...${JSON.stringify(args)}];
    process.on("exit", () => process.stderr.write("\\nMODULES " + JSON.stringify(Object.keys(require.cache)) + "\\n"));
    require(${JSON.stringify(main)});`;
  return new Promise((resolvePromise, reject) => {
    execFile(process.execPath, ["-e", script], { timeout: 20_000 }, (err, stdout, stderr) => {
      const listed = /^MODULES (.*)$/m.exec(stderr);
      if (!listed) return reject(new Error(`no module list: ${stderr}`));
      const files: unknown = JSON.parse(listed[1]);
      if (!Array.isArray(files)) return reject(new Error(`not a list: ${listed[1]}`));
      const loaded = Object.entries(heavy)
        .filter(([, pattern]) => files.some((f) => typeof f === "string" && pattern.test(f)))
        .map(([name]) => name);
      const code = err === null ? 0 : typeof err.code === "number" ? err.code : -1;
      resolvePromise({ code, stdout, loaded });
    });
  });
}

let config: string;
beforeAll(async () => {
  config = await mkdtemp(join(tmpdir(), "metroctl-lazy-"));
});
afterAll(async () => {
  await rm(config, { recursive: true, force: true });
});

it.each([
  [["--help"]],
  [["nodes", "--help"]],
  [["node", "logs", "--help"]],
  [["completion", "bash"]],
  [["completion", "zsh"]],
  [["version"]],
])("metroctl %j loads none of grpc-js, the protobuf code, x509, CEL", async (args) => {
  const res = await run(args);
  expect(res.code).toBe(0);
  expect(res.stdout).not.toBe("");
  expect(res.loaded).toEqual([]);
});

it("loads the CEL engine for a --filter, and not without one", async () => {
  // Both fail on the empty config dir, after the filter is checked.
  const filtered = await run(["--config", config, "nodes", "--filter", 'node.state == "UP"']);
  expect(filtered.code).toBe(1);
  expect(filtered.loaded).toContain("CEL");
  const unfiltered = await run(["--config", config, "nodes"]);
  expect(unfiltered.code).toBe(1);
  expect(unfiltered.loaded).not.toContain("CEL");
  expect(unfiltered.loaded).toContain("x509");
});

it("prints its package's version", async () => {
  const res = await run(["version"]);
  const { version }: { version: string } = JSON.parse(
    await readFile(resolve(__dirname, "..", "package.json"), "utf8"),
  );
  expect(res.stdout).toBe(`metroctl ${version}\n`);
});

it("names the gRPC status codes as grpc-js does, without loading it", () => {
  for (const [code, name] of grpcStatusNames.entries()) expect(status[name]).toBe(code);
  expect(grpcStatusNames).toHaveLength(Object.keys(status).length / 2);
});
