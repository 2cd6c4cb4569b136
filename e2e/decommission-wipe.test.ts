/**
 * e2e `metroctl node decommission --wipe` (issue 38 part 2): three real
 * nodes, the first two consensus members, and the owner's metroctl.
 *
 * 1. `node decommission ID --wipe` of the second member: its etcd member is
 *    removed (etcd's word), its roles taken away, then the curator records
 *    the wipe in the node's record while its certificate is still valid, the
 *    node reads it on its Watch of itself and acknowledges it on its
 *    heartbeat (metroctl says so, exit 0), then the node stops, empties
 *    its data directory and its ESP (sealed configuration, etcd data, keys)
 *    and exits with the power-off status, 0 — not the reboot status 75,
 *    which its service manager would restart.
 * 2. `node decommission ID` without `--wipe`: the node stops as a node of no
 *    cluster (exit 1) and its data directory and sealed configuration stay;
 *    a `--wipe` asked afterwards is refused (its certificate is revoked: it
 *    could never learn of it) and touches nothing.
 */
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { rebootExitStatus } from "@metropolis/node";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import type { NodeProcess } from "../local-cluster/src/node-process";
import { E2eCluster, E2eHarnessError } from "./e2e-cluster";

jest.setTimeout(300_000);

let e2e: E2eCluster;

/** The node's current process. @throws E2eHarnessError when it was never started. */
function processOf(node: ClusterNode): NodeProcess {
  if (!node.process) throw new E2eHarnessError(`${node.name} was never started`);
  return node.process;
}

/** The number of etcd peer certificates `node decommission` says it revoked (at least one). */
function revoked(stdout: string): string {
  const count = /etcd member removed, ([1-9]\d*) etcd peer certificates revoked/.exec(stdout)?.[1];
  if (count === undefined)
    throw new Error(`no revoked peer certificates in ${JSON.stringify(stdout)}`);
  return count;
}

/** The entries of the node's data directory and of its ESP (its --root's `data/` and `esp/`). */
async function storageOf(node: ClusterNode): Promise<{ data: string[]; esp: string[] }> {
  return {
    data: (await readdir(join(node.root, "data"))).sort(),
    esp: (await readdir(join(node.root, "esp"))).sort(),
  };
}

beforeAll(async () => {
  e2e = await E2eCluster.create("decommission-wipe", { nodes: 3, consensusOnEveryNode: false });
  await e2e.up();
  await e2e.allHealthy(e2e.cluster.nodes);
  // A member, so that the wipe follows the removal of its etcd member and the stop of its etcd.
  await e2e.cluster.setConsensus(e2e.cluster.nodes[1], true);
}, 240_000);

afterAll(async () => {
  await e2e?.teardown();
});

it("--wipe of a member: the node acknowledges, empties its data directory and ESP, and exits with the power-off status", async () => {
  const wiped = e2e.cluster.nodes[1];
  const proc = processOf(wiped);
  const before = await storageOf(wiped);
  expect(before.data).toEqual(expect.arrayContaining(["etcd", "node"]));
  expect(before.esp).toEqual(["metropolis"]);
  const staying = [e2e.cluster.nodes[0]];
  expect((await e2e.etcdMembers(staying[0])).map((m) => m.name)).toContain(wiped.id);

  const res = await e2e.measure("node decommissioned with --wipe (acknowledged)", () =>
    e2e.cluster.metroctl(["node", "decommission", wiped.id, "--wipe"]),
  );
  expect(res).toEqual({
    exitCode: 0,
    stderr: "",
    stdout:
      `node ${wiped.id} decommissioned: its etcd member removed, ${revoked(res.stdout)} etcd peer certificates revoked; its roles taken away and its certificate revoked (the node stops); \`metroctl delete ${wiped.id}\` removes its record\n` +
      `node ${wiped.id} acknowledged the wipe: it erases its storage and powers off\n`,
  });
  expect((await e2e.etcdMembers(staying[0])).map((m) => m.name)).toEqual([staying[0].id]);
  const exit = await e2e.measure("wiped node exited", () => proc.exited);
  expect(exit).toEqual({ code: 0, signal: null });
  expect(exit.code).not.toBe(rebootExitStatus);
  expect(await storageOf(wiped)).toEqual({ data: [], esp: [] });
  expect((await e2e.cluster.listNodes()).find((v) => v.id === wiped.id)).toMatchObject({
    state: "DECOMMISSIONED",
    roles: [],
  });
  // local-cluster starts a node again only after the reboot status: it stays off.
  expect(wiped.process).toBe(proc);
  await e2e.allHealthy([e2e.cluster.nodes[0], e2e.cluster.nodes[2]]);
});

it("without --wipe the node stops (exit 1) and keeps its data; a --wipe asked afterwards is refused", async () => {
  const kept = e2e.cluster.nodes[2];
  const proc = processOf(kept);
  const before = await storageOf(kept);

  const res = await e2e.cluster.metroctl(["node", "decommission", kept.id]);
  expect(res).toMatchObject({ exitCode: 0, stderr: "" });
  expect(await e2e.measure("decommissioned node exited", () => proc.exited)).toEqual({
    code: 1,
    signal: null,
  });
  const after = await storageOf(kept);
  expect(after).toEqual(before);
  expect(after.data).toEqual(expect.arrayContaining(["etcd", "node"]));
  expect(await readdir(join(kept.root, "esp", "metropolis"))).toContain("sealed_configuration.pb");

  const refused = await e2e.cluster.metroctl(["node", "decommission", kept.id, "--wipe"]);
  expect(refused).toEqual({
    exitCode: 1,
    stdout: "",
    stderr: `metroctl: node decommission: FAILED_PRECONDITION: node ${kept.id} was decommissioned without a wipe: its certificate is revoked, so it can no longer be told to wipe itself; erase its storage on its machine\n`,
  });
  expect(await storageOf(kept)).toEqual(before);
});
