/**
 * A cluster on the shipped executables: LocalCluster runs `metropolis-node`
 * as its package's `bin` (packages/node/bin/metropolis-node.js, which runs
 * the bundle through V8's code cache; through $METROPOLIS_NODE_BINARY)
 * instead of tsc's output, which `npm start` and the e2e tests run; and
 * metroctl's bin lists it. So the bundles — the etcd client with the protos
 * built into it, the gRPC services, the node's storage — are run for real
 * by `npm test`, and cannot rot unnoticed. Both are built by
 * `npm run build:bundles` (`npm install` and `npm test` run it before jest).
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { curatorPort } from "../src/cluster-view";
import { LocalCluster } from "../src/cluster-launcher";
import { randomLoopbackNet } from "../src/loopback-net";

jest.setTimeout(120_000);

const repo = resolve(__dirname, "..", "..");
const nodeBin = join(repo, "packages", "node", "bin", "metropolis-node.js");
const metroctlBin = join(repo, "packages", "metroctl", "bin", "metroctl.js");

let stateDir: string;
let cluster: LocalCluster;
const address = randomLoopbackNet();
const previous = {
  binary: process.env.METROPOLIS_NODE_BINARY,
  cache: process.env.XDG_CACHE_HOME,
};

/** Sets or (undefined) removes an environment variable of this process and its children. */
function setEnv(name: string, value: string | undefined): void {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}

beforeAll(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "local-cluster-bundle-"));
  setEnv("METROPOLIS_NODE_BINARY", nodeBin);
  // The bins' code cache, in the state dir: removed with it.
  setEnv("XDG_CACHE_HOME", join(stateDir, "cache"));
  cluster = new LocalCluster({ stateDir, nodes: 1, address, log: () => undefined });
  await cluster.up();
});

afterAll(async () => {
  setEnv("METROPOLIS_NODE_BINARY", previous.binary);
  setEnv("XDG_CACHE_HOME", previous.cache);
  await cluster?.stop();
  cluster?.release();
  await rm(stateDir, { recursive: true, force: true });
});

it("runs the node from its bin", async () => {
  const pid = cluster.node(1).process?.pid;
  const commandLine = (await readFile(`/proc/${pid}/cmdline`, "utf8")).split("\0");
  expect(commandLine.slice(0, 2)).toEqual([process.execPath, nodeBin]);
});

it("lists the node UP with metroctl's bin", async () => {
  const stdout = await new Promise<string>((done, fail) =>
    execFile(
      process.execPath,
      [
        metroctlBin,
        ...["--config", cluster.metroctlDir, "--endpoints", `${address(1)}:${curatorPort}`],
        ...["nodes", "-o", "json"],
      ],
      { timeout: 30_000 },
      (err, out, stderr) => (err ? fail(new Error(`${err.message}: ${stderr}`)) : done(out)),
    ),
  );
  const nodes: unknown = JSON.parse(stdout);
  expect(nodes).toEqual([
    expect.objectContaining({ id: cluster.node(1).id, address: address(1), state: "UP" }),
  ]);
});
