/**
 * The built executable (dist/main.js, made by `tsc -b`, which `npm test`
 * runs before jest) as an operator runs it: a child process against a real
 * cluster, with its exit code, its output and nothing else on stderr.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { metroctl, clusterPerFile, type MetroctlCluster } from "./cluster-fixture";

const main = resolve(__dirname, "..", "dist", "main.js");

let cluster: MetroctlCluster;
let config: string;

clusterPerFile((c, dir) => ((cluster = c), (config = dir)));

function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolvePromise) => {
    execFile(
      process.execPath,
      [main, "--config", config, ...args],
      { env: { PATH: process.env.PATH, HOME: config }, timeout: 20_000 },
      (err, stdout, stderr) =>
        resolvePromise({
          code: err ? ((err as { code?: number }).code ?? -1) : 0,
          stdout,
          stderr,
        }),
    );
  });
}

it("is built (npm test runs tsc -b before jest)", () => {
  expect(existsSync(main)).toBe(true);
});

it("lists the cluster's nodes as JSON and exits 0", async () => {
  const res = await run(["nodes", "-o", "json"]);
  expect(res.stderr).toBe("");
  expect(res.code).toBe(0);
  expect(JSON.parse(res.stdout)).toContainEqual(
    expect.objectContaining({ id: cluster.leader.firstNode.nodeId, state: "UP" }),
  );
});

it("reports a refusal of the cluster as one line and exit code 1", async () => {
  const missing = "metropolis-" + "12".repeat(16);
  const res = await run(["approve", missing]);
  expect(res).toEqual({
    code: 1,
    stdout: "",
    stderr: `metroctl: approve: NOT_FOUND: node ${missing} not found\n`,
  });
});

it("writes the same parameters in-process and as a binary", async () => {
  const a = join(config, "a.pb");
  const b = join(config, "b.pb");
  expect((await run(["bootstrap-params", "-o", a])).code).toBe(0);
  expect((await metroctl(config, ["bootstrap-params", "-o", b])).code).toBe(0);
  const { readFile } = await import("node:fs/promises");
  expect((await readFile(a)).equals(await readFile(b))).toBe(true);
});
