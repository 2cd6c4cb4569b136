/**
 * A cluster on the shipped executables: LocalCluster runs `metropolis-node`
 * from its bundle (packages/node/bundle/metropolis-node.js, the package's
 * `bin`, through $METROPOLIS_NODE_BINARY) instead of tsc's output, which
 * `npm start` and the e2e tests run; and the metroctl bundle lists it. So
 * the bundles — the etcd client with the protos built into it, the gRPC
 * services, the node's storage — are run for real by `npm test`, and cannot
 * rot unnoticed. Both are built by `npm run build:bundles` (`npm install`
 * and `npm test` run it before jest).
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
const nodeBundle = join(repo, "packages", "node", "bundle", "metropolis-node.js");
const metroctlBundle = join(repo, "packages", "metroctl", "bundle", "metroctl.js");

let stateDir: string;
let cluster: LocalCluster;
const address = randomLoopbackNet();
const previousBinary = process.env.METROPOLIS_NODE_BINARY;

beforeAll(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "local-cluster-bundle-"));
  process.env.METROPOLIS_NODE_BINARY = nodeBundle;
  cluster = new LocalCluster({ stateDir, nodes: 1, address, log: () => undefined });
  await cluster.up();
});

afterAll(async () => {
  if (previousBinary === undefined) delete process.env.METROPOLIS_NODE_BINARY;
  else process.env.METROPOLIS_NODE_BINARY = previousBinary;
  await cluster?.stop();
  cluster?.release();
  await rm(stateDir, { recursive: true, force: true });
});

it("runs the node from its bundle", async () => {
  const pid = cluster.node(1).process?.pid;
  const commandLine = (await readFile(`/proc/${pid}/cmdline`, "utf8")).split("\0");
  expect(commandLine.slice(0, 2)).toEqual([process.execPath, nodeBundle]);
});

it("lists the bundled node UP with the bundled metroctl", async () => {
  const stdout = await new Promise<string>((done, fail) =>
    execFile(
      process.execPath,
      [
        metroctlBundle,
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
