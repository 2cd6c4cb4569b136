/**
 * The node's side of `metroctl node decommission --wipe`, against a real
 * curator (etcd, mutual TLS): the role fetch worker orders the wipe only
 * from the node's own record, DECOMMISSIONED with `wipe_requested`, and
 * only then do the node's heartbeats acknowledge it; the curator's
 * DecommissionNode answers that the node acknowledged (it revoked the
 * certificate only after). A decommission without a wipe orders none.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "@metropolis/event";
import { dir, file, place, protobufCodec } from "@metropolis/localstorage";
import { unaryCall } from "@metropolis/curator";
import { api, common } from "@metropolis/proto";
import { startOnMock, eventually } from "@metropolis/supervisor/testing";
import { heartbeatWorker } from "../src/heartbeat";
import { roleFetchWorker } from "../src/rolefetch";
import { RoleserveValues } from "../src/values";
import { startTestCluster, type TestCluster } from "./curator-fixture";

let cluster: TestCluster;
let tmp: string;
beforeAll(async () => {
  cluster = await startTestCluster();
  tmp = await mkdtemp(join(tmpdir(), "roleserve-wipe-"));
});
afterAll(async () => {
  await cluster?.stop();
  await rm(tmp, { recursive: true, force: true });
});

/** A new UP worker node with its role fetch and heartbeat workers running on MockContexts. */
async function runningNode(name: string) {
  const node = await cluster.addNode();
  await cluster.updateRoles(node.nodeId, { kubernetesWorker: true });
  const root = place(
    dir({ roles: file("roles.pb", { codec: protobufCodec(common.NodeRoles) }) }),
    join(tmp, name),
  );
  await root.mkdirAll();
  const values = new RoleserveValues();
  values.curatorConnection.set(cluster.connect(node));
  const disowned = jest.spyOn(values.disowned, "set");
  const rolefetch = startOnMock("root.rolefetch", roleFetchWorker(values, { roles: root.roles }));
  const heartbeat = startOnMock(
    "root.heartbeat",
    heartbeatWorker(values, { intervalMs: 100, wipe: values }),
  );
  await eventually(
    () => rolefetch.ctx.state === "healthy" && heartbeat.ctx.state === "healthy",
    "both workers healthy",
  );
  return {
    node,
    values,
    disowned,
    stop: async () => {
      await rolefetch.stop();
      await heartbeat.stop();
    },
  };
}

const decommission = (nodeId: string, wipe: boolean) =>
  cluster.management((m) =>
    unaryCall<api.DecommissionNodeRequest, api.DecommissionNodeResponse>(
      m.decommissionNode.bind(m),
      { node: { $case: "id", id: nodeId }, force: false, wipe },
    ),
  );

describe("wipe on decommission", () => {
  it("is ordered by the node's record, acknowledged on its heartbeat before the curator revokes it", async () => {
    const run = await runningNode("wiped");
    try {
      const res = await decommission(run.node.nodeId, true);
      expect(res).toEqual({
        nodeId: run.node.nodeId,
        consensusMemberRemoved: false,
        revokedPeerCertificates: 0,
        alreadyDecommissioned: false,
        wipeRequested: true,
        wipeAcknowledged: true,
      });
      const signal = AbortSignal.timeout(5000);
      expect(await waitFor(run.values.wipeOrdered, (v) => v, signal)).toBe(true);
      expect(await waitFor(run.values.wipeAcknowledged, (v) => v, signal)).toBe(true);
      expect(run.disowned.mock.calls[0]).toEqual([
        "the owner decommissioned it, asking it to wipe its storage",
      ]);
      expect(await cluster.getNode(run.node.nodeId)).toMatchObject({
        state: common.NodeState.DECOMMISSIONED,
      });
      // Again: the record still asks for it; nothing new to acknowledge (the node is revoked).
      const again = await decommission(run.node.nodeId, false);
      expect(again).toMatchObject({ alreadyDecommissioned: true, wipeRequested: true });
    } finally {
      await run.stop();
    }
  }, 30_000);

  it("is never ordered by a decommission without it, and cannot be asked for afterwards", async () => {
    const run = await runningNode("kept");
    try {
      const res = await decommission(run.node.nodeId, false);
      expect(res).toMatchObject({ wipeRequested: false, wipeAcknowledged: false });
      await eventually(() => run.disowned.mock.calls.length > 0, "the decommission passed on");
      expect(run.disowned.mock.calls[0]).toEqual(["the owner decommissioned it"]);
      expect(await waitFor(run.values.wipeOrdered, () => true, AbortSignal.timeout(1000))).toBe(
        false,
      );
      expect(
        await waitFor(run.values.wipeAcknowledged, () => true, AbortSignal.timeout(1000)),
      ).toBe(false);
      // Its certificate is revoked: it could never read a wipe asked for now.
      await expect(decommission(run.node.nodeId, true)).rejects.toMatchObject({
        details: expect.stringMatching(
          /^node .* was decommissioned without a wipe: its certificate is revoked, so it can no longer be told to wipe itself; erase its storage on its machine$/,
        ),
      });
    } finally {
      await run.stop();
    }
  }, 30_000);
});
