/**
 * e2e decommission and quorum-safe maintenance (issue 38 parts 2 and 3):
 * three real nodes, every one a consensus member, and the owner's metroctl.
 *
 * 1. `node decommission` of a member that does not lead: etcd no longer
 *    lists its member (asked of a remaining member's own etcd), its record
 *    is DECOMMISSIONED without roles, its certificate is refused by the
 *    curator leader as revoked, and the node stops (its watch of itself
 *    refused: exit 1).
 * 2. Two voters left: `node reboot` of either is refused FAILED_PRECONDITION
 *    (one healthy voter would remain, fewer than their quorum of two) and the
 *    node is not asked; `--force` passes the check, says what it risks, the
 *    node reboots, comes back UP and HEALTHY, and both are voters again.
 */
import { status } from "@grpc/grpc-js";
import { rebootExitStatus } from "@metropolis/node";
import { eventually } from "@metropolis/supervisor/testing";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import type { NodeProcess } from "../local-cluster/src/node-process";
import { E2eCluster, E2eHarnessError } from "./e2e-cluster";
import { consensusStatusAs, nodeTls } from "./node-tls";

jest.setTimeout(300_000);

let e2e: E2eCluster;

/** The node's current process. @throws E2eHarnessError when it was never started. */
function processOf(node: ClusterNode): NodeProcess {
  if (!node.process) throw new E2eHarnessError(`${node.name} was never started`);
  return node.process;
}

beforeAll(async () => {
  e2e = await E2eCluster.create("decommission", { nodes: 3 });
  await e2e.up();
  await e2e.allHealthy(e2e.cluster.nodes);
}, 240_000);

afterAll(async () => {
  await e2e?.teardown();
});

it("decommissions a member: etcd removed its member, roles gone, certificate refused, DECOMMISSIONED", async () => {
  const nodes = e2e.cluster.nodes;
  const leaderId = await e2e.agreedLeader(nodes);
  const gone = nodes.find((n) => n.id !== leaderId);
  if (gone === undefined) throw new Error("no node but the leader");
  const staying = nodes.filter((n) => n !== gone);
  const leader = e2e.cluster.nodeById(leaderId);
  const proc = processOf(gone);
  // Read while it is a member (only members seal what opens their data).
  const tls = await nodeTls(gone);
  expect(await consensusStatusAs(tls, leader)).toBe("answered");
  expect((await e2e.etcdMembers(leader)).map((m) => m.name)).toContain(gone.id);

  const res = await e2e.measure("node decommissioned (member removed, certificate revoked)", () =>
    e2e.cluster.metroctl(["node", "decommission", gone.id]),
  );
  expect(res).toEqual({
    exitCode: 0,
    stderr: "",
    stdout: expect.stringMatching(
      new RegExp(
        `^node ${gone.id} decommissioned: its etcd member removed, [1-9]\\d* etcd peer certificates revoked; its roles taken away and its certificate revoked`,
      ),
    ),
  });
  // etcd's own word, from each remaining member's etcd.
  for (const node of staying) {
    expect((await e2e.etcdMembers(node)).map((m) => m.name).sort()).toEqual(
      staying.map((n) => n.id).sort(),
    );
  }
  const view = (await e2e.cluster.listNodes()).find((v) => v.id === gone.id);
  expect(view).toMatchObject({ state: "DECOMMISSIONED", roles: [] });
  expect(await consensusStatusAs(tls, leader)).toEqual({
    code: status.UNAUTHENTICATED,
    details: expect.stringMatching(/was revoked by the cluster CA/),
  });
  // Refused by the cluster, it stops as a node of no cluster.
  const exit = await e2e.measure("decommissioned node stopped", () => proc.exited);
  expect(exit).toEqual({ code: 1, signal: null });
  // Both others carry on: UP, HEALTHY, voters.
  for (const members of await e2e.votingMembers(staying)) {
    expect(members).toEqual(staying.map((n) => n.id).sort());
  }
  await e2e.allHealthy(staying);
});

it("with two voters left refuses a reboot of either (FAILED_PRECONDITION); --force passes the check", async () => {
  const voters = e2e.cluster.nodes.filter((n) => n.process?.running);
  expect(voters).toHaveLength(2);
  for (const node of voters) {
    const refused = await e2e.cluster.metroctl(["node", "reboot", node.id]);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toMatch(
      new RegExp(
        `^metroctl: node reboot: FAILED_PRECONDITION: rebooting node ${node.id} is refused: afterwards 1 healthy voter would remain, fewer than the quorum of 2 \\(of 2 voters\\); .*--force`,
      ),
    );
    expect(processOf(node).running).toBe(true);
  }

  const leaderId = await e2e.agreedLeader(voters);
  const target = voters.find((n) => n.id !== leaderId) ?? voters[0];
  const before = processOf(target);
  const forced = await e2e.cluster.metroctl(["node", "reboot", target.id, "--force"]);
  expect(forced).toEqual({
    exitCode: 0,
    stderr: `metroctl: node reboot: --force: taking node ${target.id} away is not quorum-checked; if fewer healthy etcd voters than a quorum remain, the cluster stops committing writes (no node changes, no curator failover) until enough of them are back\n`,
    stdout: `node ${target.id} is rebooting\n`,
  });
  expect(await before.exited).toEqual({ code: rebootExitStatus, signal: null });
  await eventually(() => target.process !== before, "local-cluster to start the node again", {
    timeoutMs: 10_000,
  });
  await e2e.measure("forced reboot: back UP and HEALTHY, both voters again", async () => {
    await e2e.cluster.waitFor(target, { state: "UP", health: "HEALTHY" }, 90_000);
    await e2e.allHealthy(voters);
    for (const members of await e2e.votingMembers(voters)) {
      expect(members).toEqual(voters.map((n) => n.id).sort());
    }
  });
});
