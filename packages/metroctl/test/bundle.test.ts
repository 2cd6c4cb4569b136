/**
 * The `metroctl` executable as shipped: the bundle esbuild builds into
 * bundle/metroctl.js (`npm run build:bundles`, which `npm install` and
 * `npm test` run before jest), and the package's `bin`, bin/metroctl.js,
 * which runs it through V8's code cache (bundle/launcher.js). Both answer as
 * tsc's output of the same sources does (dist/main.js); the cache is kept
 * only in a directory private to the user; a stack trace taken while the
 * bundle runs names the TypeScript sources, through its source map.
 */
import { execFile } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const packageDir = resolve(__dirname, "..");
const bin = resolve(packageDir, "bin", "metroctl.js");
const bundle = resolve(packageDir, "bundle", "metroctl.js");
const dist = resolve(packageDir, "dist", "main.js");

let cacheHome: string;
beforeAll(async () => {
  cacheHome = await mkdtemp(join(tmpdir(), "metroctl-bundle-cache-"));
});
afterAll(async () => {
  await rm(cacheHome, { recursive: true, force: true });
});

/** Runs `node args…` with the code cache under `cache`; resolves with its exit code and output. */
function run(
  args: string[],
  cache = join(cacheHome, "default"),
): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { PATH: process.env.PATH, HOME: "/nonexistent", XDG_CACHE_HOME: cache };
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

/** The stack of an Error made by the first write to stdout while `script` runs with `args`. */
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

it("is built, with its source map and its launcher, and run by the package's bin", async () => {
  expect(existsSync(bundle)).toBe(true);
  expect(existsSync(`${bundle}.map`)).toBe(true);
  expect(statSync(bin).mode & 0o111).not.toBe(0);
  expect((await readFile(bin, "utf8")).startsWith("#!/usr/bin/env node\n")).toBe(true);
  expect((await readFile(bundle, "utf8")).startsWith("#!/usr/bin/env node\n")).toBe(true);
  expect(existsSync(resolve(packageDir, "bundle", "launcher.js"))).toBe(true);
  const pkg: { bin?: Record<string, string> } = JSON.parse(
    await readFile(resolve(packageDir, "package.json"), "utf8"),
  );
  expect(pkg.bin).toEqual({ metroctl: "bin/metroctl.js" });
});

it.each([
  [["--help"]],
  [["nodes", "--help"]],
  [["cluster", "configure", "--help"]],
  [["completion", "bash"]],
  [["version"]],
])("answers %j with exit 0 and the text of the unbundled entry", async (args) => {
  const [launched, bundled, unbundled] = await Promise.all([
    run([bin, ...args]),
    run([bundle, ...args]),
    run([dist, ...args]),
  ]);
  expect(bundled).toEqual({ code: 0, stdout: unbundled.stdout, stderr: "" });
  expect(launched).toEqual(bundled);
  expect(bundled.stdout).not.toBe("");
});

it("fails as the unbundled entry does: one line, exit 1", async () => {
  const args = ["--config", "/nonexistent/metroctl", "nodes", "--filter", "node.sate == 1"];
  const [launched, unbundled] = await Promise.all([run([bin, ...args]), run([dist, ...args])]);
  expect(launched).toEqual(unbundled);
  expect(launched.code).toBe(1);
  expect(launched.stderr).toMatch(/^metroctl: nodes: --filter: No such key: sate/);
});

it("keeps the code cache in a directory of the user's own, 0700, and uses it", async () => {
  const cache = join(cacheHome, "private");
  expect((await run([bin, "version"], cache)).code).toBe(0);
  const dir = join(cache, "metropolis");
  expect(statSync(dir).mode & 0o777).toBe(0o700);
  const files = await readdir(dir);
  expect(files).toEqual([expect.stringMatching(/^metroctl\.js-.*\.v8$/)]);
  expect(statSync(join(dir, files[0])).mode & 0o777).toBe(0o600);
  const saved = statSync(join(dir, files[0])).mtimeMs;
  // A run the cache covers leaves it as it is.
  expect(await run([bin, "version"], cache)).toEqual(await run([dist, "version"]));
  expect(statSync(join(dir, files[0])).mtimeMs).toBe(saved);
});

it("neither reads nor writes a code cache others may write to", async () => {
  const cache = join(cacheHome, "shared");
  await mkdir(join(cache, "metropolis"), { recursive: true });
  await chmod(join(cache, "metropolis"), 0o777);
  const res = await run([bin, "version"], cache);
  expect(res.code).toBe(0);
  expect(await readdir(join(cache, "metropolis"))).toEqual([]);
});

it("names the TypeScript sources in a stack trace taken while it runs", async () => {
  for (const script of [bin, bundle]) {
    const stack = await stackOfFirstWrite(script, ["--help"]);
    expect(stack).toContain(`${resolve(packageDir, "src", "run-metroctl.ts")}:`);
    expect(stack).toMatch(/at runMetroctl \(.*[\\/]src[\\/]run-metroctl\.ts:\d+:\d+\)/);
    expect(stack).not.toContain(bundle);
  }
});
