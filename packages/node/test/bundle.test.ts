/**
 * The `metropolis-node` executable as shipped: the bundle esbuild builds
 * into bundle/metropolis-node.js (`npm run build:bundles`, which
 * `npm install` and `npm test` run before jest), and the package's `bin`,
 * bin/metropolis-node.js, which runs it through V8's code cache
 * (bundle/launcher.js, tested with metroctl's, the same file:
 * packages/metroctl/test/bundle.test.ts). It answers `--help` and a bad
 * flag as tsc's output of the same sources does (dist/main.js), and a stack
 * trace taken while it runs names the TypeScript sources.
 * local-cluster/test/bundle-node.test.ts runs a cluster on it.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const packageDir = resolve(__dirname, "..");
const bin = resolve(packageDir, "bin", "metropolis-node.js");
const bundle = resolve(packageDir, "bundle", "metropolis-node.js");
const dist = resolve(packageDir, "dist", "main.js");

let cacheHome: string;
beforeAll(async () => {
  cacheHome = await mkdtemp(join(tmpdir(), "node-bundle-cache-"));
});
afterAll(async () => {
  await rm(cacheHome, { recursive: true, force: true });
});

/** Runs `node args…` with the code cache in a directory of the test's; resolves with its exit code and output. */
function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { PATH: process.env.PATH, XDG_CACHE_HOME: cacheHome };
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

it("is built, with its source map and its launcher, and run by the package's bin", async () => {
  expect(existsSync(bundle)).toBe(true);
  expect(existsSync(`${bundle}.map`)).toBe(true);
  expect((await readFile(bin, "utf8")).startsWith("#!/usr/bin/env node\n")).toBe(true);
  expect((await readFile(bundle, "utf8")).startsWith("#!/usr/bin/env node\n")).toBe(true);
  const pkg: { bin?: Record<string, string> } = JSON.parse(
    await readFile(resolve(packageDir, "package.json"), "utf8"),
  );
  expect(existsSync(resolve(packageDir, "bundle", "launcher.js"))).toBe(true);
  expect(pkg.bin).toEqual({ "metropolis-node": "bin/metropolis-node.js" });
});

it("answers --help with exit 0 and the text of the unbundled entry", async () => {
  const [launched, bundled, unbundled] = await Promise.all([
    run([bin, "--help"]),
    run([bundle, "--help"]),
    run([dist, "--help"]),
  ]);
  expect(bundled).toEqual({ code: 0, stdout: unbundled.stdout, stderr: "" });
  expect(launched).toEqual(bundled);
  expect(bundled.stdout).toMatch(/^usage: metropolis-node /);
});

it("refuses a bad flag as the unbundled entry does (exit 2)", async () => {
  const [launched, unbundled] = await Promise.all([run([bin, "--bogus"]), run([dist, "--bogus"])]);
  expect(launched).toEqual(unbundled);
  expect(launched.code).toBe(2);
});

it("names the TypeScript sources in a stack trace taken while it runs", async () => {
  for (const script of [bin, bundle]) {
    const probe = `
      const write = process.stderr.write.bind(process.stderr);
      let stack;
      process.stdout.write = () => { stack ??= new Error("probe").stack; return true; };
      process.argv = [process.execPath, ${JSON.stringify(script)}, "--help"];
      require(${JSON.stringify(script)});
      process.on("exit", () => write(stack));`;
    const { code, stderr } = await run(["-e", probe]);
    expect(code).toBe(0);
    expect(stderr).toContain(`${resolve(packageDir, "src", "main.ts")}:`);
    expect(stderr).not.toContain(bundle);
  }
});
