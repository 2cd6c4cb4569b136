/**
 * The status push worker against a real curator: what it pushes is what the
 * cluster sees, a control plane adds its curator port, an unchanged status is
 * not pushed again, and a refused push fails the worker. Each push is reported
 * as a `status.pushed` progress event.
 */
import type { ClientReadableStream, ServiceError } from "@grpc/grpc-js";
import { status as grpcStatus } from "@grpc/grpc-js";
import { common, curator, protocolVersion } from "@metropolis/proto";
import { readProgressEvent } from "@metropolis/supervisor/node-progress";
import { eventually, MockContext } from "@metropolis/supervisor/testing";
import { statusPushWorker } from "../src/statuspush";
import { RoleserveValues, type LocalControlPlane } from "../src/values";
import { startTestCluster, type ClusterNode, type TestCluster } from "./curator-fixture";

let cluster: TestCluster;
beforeAll(async () => {
  cluster = await startTestCluster();
});
afterAll(() => cluster?.stop());

/** Every status the curator announces for `node`, in order, from a Watch of our own. */
async function watchStatuses(node: ClusterNode) {
  const seen: (common.NodeStatus | undefined)[] = [];
  const { connection } = cluster.connect(node);
  const call = await connection.call(async (l) => l.curator);
  const stream: ClientReadableStream<curator.WatchResponse> = call.watch({
    kind: { $case: "nodeInCluster", nodeInCluster: { nodeId: node.nodeId } },
  });
  stream.on("data", (r: curator.WatchResponse) =>
    r.nodes.filter((n) => n.id === node.nodeId).forEach((n) => seen.push(n.status)),
  );
  stream.on("error", () => undefined);
  await eventually(() => seen.length > 0, "the watch's first event");
  return { seen, stop: () => stream.cancel() };
}

/** A status without its timestamp, for comparing. */
const reported = (s: common.NodeStatus | undefined) =>
  s && { ...(common.NodeStatus.toJSON(s) as object), timestamp: undefined };

describe("statusPushWorker", () => {
  it("pushes the node's status once its inputs are known, and again only when it changes", async () => {
    // The first node: a consensus member, so it may report the curator it runs.
    const node = cluster.firstNode;
    const watch = await watchStatuses(node);
    const values = new RoleserveValues();
    const ctx = new MockContext("root.statuspush");
    const opts = { address: "127.0.0.77", version: "v1.2.3", bootId: "boot-1" };
    const result = statusPushWorker(values, opts)(ctx);
    const controlPlane: LocalControlPlane = {
      consensus: cluster.member.status,
      curator: cluster.curator(),
      curatorPort: 7835,
    };
    try {
      // Until the control plane is known, nothing is pushed: the node would
      // otherwise announce "no curator" on its way to serving one.
      values.curatorConnection.set(cluster.connect(node));
      expect((await cluster.getNode(node.nodeId))?.status).toBeUndefined();
      expect(ctx.state).toBe("new");

      values.localControlPlane.set(controlPlane);
      await eventually(() => ctx.state === "healthy", "the worker healthy");
      const first = (await cluster.getNode(node.nodeId))?.status;
      expect(reported(first)).toEqual({
        externalAddress: "127.0.0.77",
        runningCurator: { port: 7835 },
        version: "v1.2.3",
        bootId: "boot-1",
        protocolVersion,
      });
      expect(first?.timestamp).toBeInstanceOf(Date);

      // The same status again (a new connection value): processed, not pushed.
      values.curatorConnection.set(cluster.connect(node));
      await eventually(
        () => ctx.lines.some((l) => l.message.startsWith("status unchanged")),
        "the unchanged status skipped",
      );

      // The control plane stops: the curator port is no longer reported.
      values.localControlPlane.set(undefined);
      await eventually(
        async () => (await cluster.getNode(node.nodeId))?.status?.runningCurator === undefined,
        "the curator port gone",
      );

      // Exactly two pushes reached the cluster: none before the control
      // plane was known, none for the unchanged status.
      await eventually(() => watch.seen.length === 3, "the watch caught up");
      expect(watch.seen.map((s) => (s ? (s.runningCurator?.port ?? "none") : "unset"))).toEqual([
        "unset", // the node before any push
        7835,
        "none",
      ]);
      // Each push, and only a push, was reported as a progress event (the
      // worker reports a push once its call has returned: after the watch saw it).
      await eventually(
        () => ctx.lines.filter((l) => readProgressEvent(l.meta) !== undefined).length >= 2,
        "both pushes reported",
      );
      expect(ctx.lines.flatMap((l) => readProgressEvent(l.meta) ?? [])).toEqual([
        { event: "status.pushed", address: "127.0.0.77", curatorPort: 7835 },
        { event: "status.pushed", address: "127.0.0.77", curatorPort: null },
      ]);
    } finally {
      watch.stop();
      ctx.abort();
      await result;
    }
    expect(ctx.failures).toEqual([]);
  });

  it("fails when the curator refuses the status", async () => {
    const node = await cluster.addNode();
    const values = new RoleserveValues();
    values.curatorConnection.set(cluster.connect(node));
    values.localControlPlane.set(undefined);
    const ctx = new MockContext("root.statuspush");
    const error = await statusPushWorker(values, {
      address: "not-an-ip",
      version: "v1",
      bootId: "b",
    })(ctx).then(
      () => undefined,
      (e: unknown) => e as ServiceError,
    );
    expect(error?.code).toBe(grpcStatus.INVALID_ARGUMENT);
    expect(ctx.state).toBe("new");
    expect((await cluster.getNode(node.nodeId))?.status).toBeUndefined();
  });
});
