/**
 * The `metropolis-node` executable as shipped: the bundle esbuild builds
 * into bundle/metropolis-node.js (`npm run build:bundles`, which
 * `npm install` and `npm test` run before jest), the package's `bin`. It
 * answers `--help` and a bad flag as tsc's output of the same sources does
 * (dist/main.js), and a stack trace taken while it runs names the
 * TypeScript sources. local-cluster/test/bundle-node.test.ts runs a cluster
 * on it.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";

const packageDir = resolve(__dirname, "..");
const bundle = resolve(packageDir, "bundle", "metropolis-node.js");
const dist = resolve(packageDir, "dist", "main.js");

function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) =>
    execFile(process.execPath, args, { timeout: 20_000 }, (err, stdout, stderr) =>
      done({
        code: err === null ? 0 : typeof err.code === "number" ? err.code : -1,
        stdout,
        stderr,
      }),
    ),
  );
}

it("is built, with its source map, and is the package's bin", async () => {
  expect(existsSync(bundle)).toBe(true);
  expect(existsSync(`${bundle}.map`)).toBe(true);
  expect((await readFile(bundle, "utf8")).startsWith("#!/usr/bin/env node\n")).toBe(true);
  const pkg: { bin?: Record<string, string> } = JSON.parse(
    await readFile(resolve(packageDir, "package.json"), "utf8"),
  );
  expect(pkg.bin).toEqual({ "metropolis-node": "bundle/metropolis-node.js" });
});

it("answers --help with exit 0 and the text of the unbundled entry", async () => {
  const [bundled, unbundled] = await Promise.all([run([bundle, "--help"]), run([dist, "--help"])]);
  expect(bundled).toEqual({ code: 0, stdout: unbundled.stdout, stderr: "" });
  expect(bundled.stdout).toMatch(/^usage: metropolis-node /);
});

it("refuses a bad flag as the unbundled entry does (exit 2)", async () => {
  const [bundled, unbundled] = await Promise.all([
    run([bundle, "--bogus"]),
    run([dist, "--bogus"]),
  ]);
  expect(bundled).toEqual(unbundled);
  expect(bundled.code).toBe(2);
});

it("names the TypeScript sources in a stack trace taken while it runs", async () => {
  const probe = `
    const write = process.stderr.write.bind(process.stderr);
    let stack;
    process.stdout.write = () => { stack ??= new Error("probe").stack; return true; };
    process.argv = [process.execPath, ${JSON.stringify(bundle)}, "--help"];
    require(${JSON.stringify(bundle)});
    process.on("exit", () => write(stack));`;
  const { code, stderr } = await run(["-e", probe]);
  expect(code).toBe(0);
  expect(stderr).toContain(`${resolve(packageDir, "src", "main.ts")}:`);
  expect(stderr).not.toContain(bundle);
});
