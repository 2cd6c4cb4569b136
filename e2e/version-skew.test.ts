/**
 * e2e version skew: a node built with another wire protocol version than
 * the cluster's curators serve is refused, with both versions named, when
 * it registers and when it rejoins after an upgrade — before anything is
 * written — and the node it was keeps working with the right build.
 *
 * The other build is real: metropolis-node bundled by esbuild
 * (scripts/build-bundles.js --node-variant) with @metropolis/proto's
 * protocol-version.ts speaking the next version, as a node of a later
 * release would. The owner sees each node's protocol in `node describe`.
 */
import { execFile } from "node:child_process";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { servedProtocolVersions } from "@metropolis/proto";
import type { NodeExit, NodeProcess } from "../local-cluster/src/node-process";
import { E2eCluster, unboxed } from "./e2e-cluster";

jest.setTimeout(180_000);

const repository = join(__dirname, "..");
const newer = servedProtocolVersions.newest + 1;
const refusal = new RegExp(
  `speaks wire protocol version ${newer}; this curator serves version ${servedProtocolVersions.newest}: upgrade the cluster's curators first`,
);

let e2e: E2eCluster;
/** The node built to speak protocol version `newer`. */
let newerBinary: string;

/** Builds metropolis-node with protocol-version.ts speaking `version`, as package directory `dir`. */
async function buildNodeSpeaking(version: number, dir: string): Promise<string> {
  const source = join(repository, "proto", "src", "protocol-version.ts");
  const text = await readFile(source, "utf8");
  const declaration = /export const protocolVersion = \d+;/;
  if (!declaration.test(text)) throw new Error(`${source} no longer declares protocolVersion`);
  const replacement = join(dir, "protocol-version.ts");
  await writeFile(
    replacement,
    text.replace(declaration, `export const protocolVersion = ${version};`),
  );
  const { stdout } = await promisify(execFile)(process.execPath, [
    join(repository, "scripts", "build-bundles.js"),
    "--node-variant",
    dir,
    `proto/src/protocol-version.ts=${replacement}`,
  ]);
  return stdout.trim();
}

/** Waits until `proc` exits (it must, by itself, within a minute). */
async function exitOf(proc: NodeProcess): Promise<NodeExit> {
  return Promise.race([
    proc.exited,
    new Promise<never>((_, reject) => {
      void proc
        .waitForLog(() => false, 60_000, { what: "its exit" })
        .catch((e: unknown) => (proc.running ? reject(e) : undefined));
    }),
  ]);
}

beforeAll(async () => {
  e2e = await E2eCluster.create("version-skew", { nodes: 2, consensusOnEveryNode: false });
  const dir = join(e2e.dir, `node-protocol-${newer}`);
  await mkdir(dir);
  [newerBinary] = await Promise.all([
    e2e.measure(`node speaking protocol ${newer} built`, () => buildNodeSpeaking(newer, dir)),
    e2e.up(),
  ]);
});

afterAll(async () => {
  await e2e?.teardown();
});

describe("version skew: a node of a protocol the curators do not serve", () => {
  it("the owner sees each node's wire protocol", async () => {
    const described = await e2e.cluster.metroctlOk(["node", "describe", e2e.node(2).id]);
    expect(described).toMatch(
      new RegExp(`^Version: +\\S+ \\(wire protocol ${servedProtocolVersions.newest}\\)$`, "m"),
    );
  });

  it("is refused at RegisterNode, naming both versions, and nothing is written", async () => {
    const before = await e2e.cluster.listNodes();
    const parametersPath = join(e2e.dir, "register.pb");
    await e2e.cluster.metroctlOk(["register-params", "-o", parametersPath]);
    const root = join(e2e.dir, "newer-node");
    await mkdir(root);
    const proc = await e2e.spawn({
      name: "newer",
      root,
      parametersPath,
      configPath: e2e.cluster.nodeConfigPath,
      binary: newerBinary,
    });
    expect(await exitOf(proc)).toEqual({ code: 1, signal: null });
    expect(unboxed(proc.stderr())).toMatch(/enrolment into the cluster failed/);
    expect(unboxed(proc.stderr())).toMatch(
      /RegisterNode: the cluster refused: FAILED_PRECONDITION/,
    );
    expect(unboxed(proc.stderr())).toMatch(refusal);
    const after = await e2e.cluster.listNodes();
    expect(after.map((n) => n.id)).toEqual(before.map((n) => n.id));
  });

  it("an UP node upgraded past the curators is refused at JoinNode, keeps its data, and rejoins with its own build", async () => {
    const node = e2e.node(2);
    await e2e.cluster.stopNode(node);
    const upgraded = e2e.cluster.startNode(node, undefined, newerBinary);
    expect(await exitOf(upgraded)).toEqual({ code: 1, signal: null });
    expect(unboxed(upgraded.stderr())).toMatch(
      /JoinNode: the cluster refused: FAILED_PRECONDITION/,
    );
    expect(unboxed(upgraded.stderr())).toMatch(refusal);
    // Refused, not deleted: the record is there and the node comes back as itself.
    const back = e2e.cluster.startNode(node);
    await e2e.measure("node2 UP and HEALTHY again with the cluster's build", async () => {
      await e2e.allHealthy([e2e.node(1), node], 60_000);
    });
    expect(back.running).toBe(true);
    const listed = (await e2e.cluster.listNodes()).find((n) => n.id === node.id);
    expect(listed).toMatchObject({ state: "UP", health: "HEALTHY" });
  });
});
