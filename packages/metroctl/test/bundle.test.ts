/**
 * The `metroctl` executable as shipped: the bundle esbuild builds into
 * bundle/metroctl.js (`npm run build:bundles`, which `npm install` and
 * `npm test` run before jest), the package's `bin`. It answers as tsc's
 * output of the same sources does (dist/main.js), and a stack trace taken
 * while it runs names the TypeScript sources, through its source map.
 */
import { execFile } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";

const packageDir = resolve(__dirname, "..");
const bundle = resolve(packageDir, "bundle", "metroctl.js");
const dist = resolve(packageDir, "dist", "main.js");

/** Runs `node script args…`; resolves with its exit code and output. */
function run(
  args: string[],
  env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: "/nonexistent" },
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) =>
    execFile(process.execPath, args, { env, timeout: 20_000 }, (err, stdout, stderr) =>
      done({
        code: err === null ? 0 : typeof err.code === "number" ? err.code : -1,
        stdout,
        stderr,
      }),
    ),
  );
}

/**
 * The stack of an Error made by the first write to stdout of `script` run
 * with `args`: every frame of metroctl's code on it is in the bundle.
 */
async function stackOfFirstWrite(script: string, args: string[]): Promise<string> {
  const probe = `
    const write = process.stderr.write.bind(process.stderr);
    let stack;
    process.stdout.write = () => { stack ??= new Error("probe").stack; return true; };
    process.argv = [process.execPath, ${JSON.stringify(script)}, ...${JSON.stringify(args)}];
    require(${JSON.stringify(script)});
    process.on("exit", () => write(stack));`;
  const { code, stderr } = await run(["-e", probe]);
  expect(code).toBe(0);
  return stderr;
}

it("is built, with its source map, and is the package's bin", async () => {
  expect(existsSync(bundle)).toBe(true);
  expect(existsSync(`${bundle}.map`)).toBe(true);
  expect(statSync(bundle).mode & 0o111).not.toBe(0);
  const text = await readFile(bundle, "utf8");
  expect(text.startsWith("#!/usr/bin/env node\n")).toBe(true);
  const pkg: { bin?: Record<string, string> } = JSON.parse(
    await readFile(resolve(packageDir, "package.json"), "utf8"),
  );
  expect(pkg.bin).toEqual({ metroctl: "bundle/metroctl.js" });
});

it.each([
  [["--help"]],
  [["nodes", "--help"]],
  [["cluster", "configure", "--help"]],
  [["completion", "bash"]],
  [["version"]],
])("answers %j with exit 0 and the text of the unbundled entry", async (args) => {
  const [bundled, unbundled] = await Promise.all([run([bundle, ...args]), run([dist, ...args])]);
  expect(bundled).toEqual({ code: 0, stdout: unbundled.stdout, stderr: "" });
  expect(bundled.stdout).not.toBe("");
});

it("fails as the unbundled entry does: one line, exit 1", async () => {
  const args = ["--config", "/nonexistent/metroctl", "nodes", "--filter", "node.sate == 1"];
  const [bundled, unbundled] = await Promise.all([run([bundle, ...args]), run([dist, ...args])]);
  expect(bundled).toEqual(unbundled);
  expect(bundled.code).toBe(1);
  expect(bundled.stderr).toMatch(/^metroctl: nodes: --filter: No such key: sate/);
});

it("names the TypeScript sources in a stack trace taken while it runs", async () => {
  const stack = await stackOfFirstWrite(bundle, ["--help"]);
  expect(stack).toContain(`${resolve(packageDir, "src", "run-metroctl.ts")}:`);
  expect(stack).toMatch(/at runMetroctl \(.*[\\/]src[\\/]run-metroctl\.ts:\d+:\d+\)/);
  expect(stack).not.toContain(bundle);
});
