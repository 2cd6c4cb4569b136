/**
 * The node's side of `metroctl node decommission --wipe`, against a real
 * curator (etcd, mutual TLS): the role fetch worker orders the wipe only
 * from the node's own record, DECOMMISSIONED with `wipe_requested`, and
 * only then do the node's heartbeats acknowledge it; the curator's
 * DecommissionNode answers that the node acknowledged (it revoked the
 * certificate only after). A decommission without a wipe orders none.
 *
 * The acknowledgement is kept in the node's record (`wipe_acknowledged`),
 * so that a `--wipe` asked again, on the same leader or on another one
 * started on the same etcd, answers from it at once without the node; and a
 * node that never acknowledges is revoked all the same after the curator's
 * (configured, here short) wait, the answer saying so.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { status } from "@grpc/grpc-js";
import { waitFor } from "@metropolis/event";
import { dir, file, place, protobufCodec } from "@metropolis/localstorage";
import { unaryCall } from "@metropolis/curator";
import { api, common, curator as curatorProto } from "@metropolis/proto";
import { startOnMock, eventually } from "@metropolis/supervisor/testing";
import { heartbeatWorker } from "../src/heartbeat";
import { roleFetchWorker } from "../src/rolefetch";
import { RoleserveValues } from "../src/values";
import { startTestCluster, type ClusterNode, type TestCluster } from "./curator-fixture";

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

/** A new UP worker node, with no workers running: it never acknowledges anything by itself. */
async function workerNode(): Promise<ClusterNode> {
  const node = await cluster.addNode();
  await cluster.updateRoles(node.nodeId, { kubernetesWorker: true });
  return node;
}

/** A new UP worker node with its role fetch and heartbeat workers running on MockContexts. */
async function runningNode(name: string) {
  const run = startWorkers(await workerNode(), name);
  await eventually(
    () => run.rolefetch.ctx.state === "healthy" && run.heartbeat.ctx.state === "healthy",
    "both workers healthy",
  );
  return run;
}

/** The role fetch and heartbeat workers of `node`, started on MockContexts; `stop` ends them. */
function startWorkers(node: ClusterNode, name: string) {
  const root = place(
    dir({ roles: file("roles.pb", { codec: protobufCodec(common.NodeRoles) }) }),
    join(tmp, name),
  );
  const values = new RoleserveValues();
  values.curatorConnection.set(cluster.connect(node));
  const disowned = jest.spyOn(values.disowned, "set");
  const made = root.mkdirAll();
  const rolefetch = startOnMock("root.rolefetch", async (ctx) => {
    await made;
    return roleFetchWorker(values, { roles: root.roles })(ctx);
  });
  const heartbeat = startOnMock(
    "root.heartbeat",
    heartbeatWorker(values, { intervalMs: 100, wipe: values }),
  );
  return {
    node,
    values,
    disowned,
    rolefetch,
    heartbeat,
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

/**
 * One Heartbeat of `node`'s own, carrying `wipe_acknowledged`, on a stream
 * of its own: resolves once it is answered.
 */
async function acknowledgeAs(node: ClusterNode): Promise<curatorProto.HeartbeatResponse> {
  const { connection } = cluster.connect(node);
  return connection.call(
    (leader) =>
      new Promise<curatorProto.HeartbeatResponse>((resolve, reject) => {
        const call = leader.curator.heartbeat();
        call.once("data", (res: curatorProto.HeartbeatResponse) => {
          call.end();
          resolve(res);
        });
        call.once("error", reject);
        call.write({ sentAt: new Date(), previousRoundTripMs: 0, wipeAcknowledged: true });
      }),
  );
}

/** Expects `node`'s certificate refused by the curator as revoked (a call of its own). */
async function expectRevoked(node: ClusterNode): Promise<void> {
  const { connection } = cluster.connect(node);
  await expect(
    connection.call((leader) =>
      unaryCall<curatorProto.GetConsensusStatusRequest, curatorProto.GetConsensusStatusResponse>(
        leader.curator.getConsensusStatus.bind(leader.curator),
        {},
      ),
    ),
  ).rejects.toMatchObject({
    code: status.UNAUTHENTICATED,
    details: expect.stringMatching(/^client certificate .* was revoked/),
  });
}

/** The test's own cancellation of a call, which CuratorConnection does not retry (it retries CANCELLED). */
class CancelledByTestError extends Error {
  constructor() {
    super("the test cancelled the DecommissionNode call");
    this.name = "CancelledByTestError";
  }
}

/**
 * Starts DecommissionNode with `wipe` on `nodeId` and cancels it once the
 * node's record is DECOMMISSIONED (marked with the wipe, while the curator
 * waits for the acknowledgement, before it revokes the certificate).
 */
async function markForWipeOnly(nodeId: string): Promise<void> {
  let cancel: (() => void) | undefined;
  let cancelled = false;
  const decommissioning = cluster.management(
    (m) =>
      new Promise<api.DecommissionNodeResponse>((resolve, reject) => {
        const call = m.decommissionNode(
          { node: { $case: "id", id: nodeId }, force: false, wipe: true },
          (err, res) => {
            if (cancelled) reject(new CancelledByTestError());
            else if (err) reject(err);
            else resolve(res);
          },
        );
        cancel = () => {
          cancelled = true;
          call.cancel();
        };
      }),
  );
  // Settled either way below; unobserved until then.
  decommissioning.catch(() => undefined);
  await eventually(
    async () => (await cluster.getNode(nodeId))?.state === common.NodeState.DECOMMISSIONED,
    "the node's record marked DECOMMISSIONED with the wipe",
  );
  if (cancel === undefined) throw new Error("the DecommissionNode call was never made");
  cancel();
  await expect(decommissioning).rejects.toBeInstanceOf(CancelledByTestError);
}

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
      // Again: the record still asks for it and says it was acknowledged.
      const again = await decommission(run.node.nodeId, false);
      expect(again).toMatchObject({
        alreadyDecommissioned: true,
        wipeRequested: true,
        wipeAcknowledged: true,
      });
      // The node wiped itself and is gone; its certificate is revoked, and this leader forgot
      // what it heard: a `--wipe` asked again answers from the record, at once (waiting for
      // an acknowledgement would take the curator's 30 s, this test's whole time).
      await run.stop();
      await expectRevoked(run.node);
      expect(await decommission(run.node.nodeId, true)).toEqual({
        nodeId: run.node.nodeId,
        consensusMemberRemoved: false,
        revokedPeerCertificates: 0,
        alreadyDecommissioned: true,
        wipeRequested: true,
        wipeAcknowledged: true,
      });
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

  it("revokes a node that never acknowledges after the curator's wait, saying it did not", async () => {
    // The wait is the curator's option; a short one ends this path quickly.
    await cluster.restartCurator({ wipeAcknowledgementTimeoutMs: 300 });
    try {
      const node = await workerNode();
      // An acknowledgement its record did not ask for is not recorded (nor trusted later).
      expect(await acknowledgeAs(node)).toEqual({ health: common.NodeHealth.HEALTHY });
      const res = await decommission(node.nodeId, true);
      expect(res).toEqual({
        nodeId: node.nodeId,
        consensusMemberRemoved: false,
        revokedPeerCertificates: 0,
        alreadyDecommissioned: false,
        wipeRequested: true,
        wipeAcknowledged: false,
      });
      await expectRevoked(node);
      expect(await cluster.getNode(node.nodeId)).toMatchObject({
        state: common.NodeState.DECOMMISSIONED,
      });
      // Asked again, it still has not: the revoked node can never acknowledge now.
      expect(await decommission(node.nodeId, true)).toMatchObject({
        alreadyDecommissioned: true,
        wipeRequested: true,
        wipeAcknowledged: false,
      });
    } finally {
      await cluster.restartCurator();
    }
  }, 30_000);

  it("is answered acknowledged by a new leader when the node acknowledged to the one before", async () => {
    const node = await workerNode();
    // The first leader marks the record, and the call ends before it revokes the node.
    await markForWipeOnly(node.nodeId);
    const run = startWorkers(node, "acknowledged-to-the-first");
    try {
      const signal = AbortSignal.timeout(10_000);
      expect(await waitFor(run.values.wipeOrdered, (v) => v, signal)).toBe(true);
      // Answered: the first leader has it in the node's record.
      expect(await waitFor(run.values.wipeAcknowledged, (v) => v, signal)).toBe(true);
    } finally {
      // The node wiped itself and powered off: nothing acknowledges to the next leader.
      await run.stop();
    }
    // A new leader on the same etcd, which never heard the node, and waits only 300 ms.
    await cluster.restartCurator({ wipeAcknowledgementTimeoutMs: 300 });
    try {
      expect(await decommission(node.nodeId, true)).toEqual({
        nodeId: node.nodeId,
        consensusMemberRemoved: false,
        revokedPeerCertificates: 0,
        alreadyDecommissioned: true,
        wipeRequested: true,
        wipeAcknowledged: true,
      });
      // Revoked now, by the new leader.
      await expectRevoked(node);
    } finally {
      await cluster.restartCurator();
    }
  }, 60_000);
});
