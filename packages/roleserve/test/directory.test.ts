/**
 * The directory worker against a real curator: the ESP directory lists the
 * UP nodes that reported an address, sorted, follows changes and deletions,
 * is never replaced by an empty one, a broken watch fails the worker, and
 * the worker's next run resumes the watch from the view it kept.
 */
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CuratorConnection, unaryCall } from "@metropolis/curator";
import { waitFor } from "@metropolis/event";
import { dir, file, place, protobufCodec } from "@metropolis/localstorage";
import { api, common, curator, priv } from "@metropolis/proto";
import { MockContext, startOnMock, eventually } from "@metropolis/supervisor/testing";
import { ClusterView, StaleViewError } from "../src/cluster-view";
import { openWatch } from "../src/curator-calls";
import { clusterDirectory, directoryWorker } from "../src/directory";
import { CuratorStreamError } from "../src/errors";
import { credentialsPem } from "../src/node-credentials";
import { RoleserveValues } from "../src/values";
import { startTestCluster, type ClusterNode, type TestCluster } from "./curator-fixture";

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "roleserve-directory-"));
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

/** A directory file of its own, declared as the node root declares `esp.metropolis.clusterDirectory`. */
async function directoryFile(name: string) {
  const root = place(
    dir({
      metropolis: dir({
        clusterDirectory: file("cluster_directory.pb", {
          codec: protobufCodec(common.ClusterDirectory),
        }),
      }),
    }),
    join(tmp, name),
  );
  await root.mkdirAll();
  return root.metropolis.clusterDirectory;
}
type DirectoryFile = Awaited<ReturnType<typeof directoryFile>>;

/** The directory file as [id, host] pairs, in file order. */
async function listed(f: DirectoryFile): Promise<[string, string][]> {
  return (await f.read()).nodes.map((n) => [n.id, n.addresses.map((a) => a.host).join(",")]);
}

function start(values: RoleserveValues, directory: DirectoryFile) {
  return startOnMock("root.directory", directoryWorker(values, { directory }));
}

describe("clusterDirectory", () => {
  it("keeps UP nodes with an address, sorted by ID", () => {
    const node = (id: string, state: common.NodeState, host?: string) => ({
      id,
      publicKey: Buffer.from(id),
      state,
      roles: undefined,
      status:
        host === undefined ? undefined : common.NodeStatus.fromPartial({ externalAddress: host }),
      labels: new Map(),
    });
    expect(
      clusterDirectory([
        node("c", common.NodeState.UP, "10.0.0.3"),
        node("a", common.NodeState.UP, "10.0.0.1"),
        node("b", common.NodeState.STANDBY, "10.0.0.2"),
        node("d", common.NodeState.UP),
        node("e", common.NodeState.UP, ""),
      ]),
    ).toEqual({
      nodes: [
        {
          id: "a",
          publicKey: Buffer.from("a"),
          addresses: [{ host: "10.0.0.1" }],
          consensusMember: false,
        },
        {
          id: "c",
          publicKey: Buffer.from("c"),
          addresses: [{ host: "10.0.0.3" }],
          consensusMember: false,
        },
      ],
    });
  });
});

describe("directoryWorker", () => {
  let cluster: TestCluster;
  beforeEach(async () => {
    cluster = await startTestCluster();
  });
  afterEach(() => cluster?.stop());

  it("never replaces the directory with an empty one", async () => {
    // No node of this fresh cluster reported an address yet.
    const directory = await directoryFile("empty");
    const old = {
      nodes: [
        {
          id: "metropolis-old",
          publicKey: Buffer.alloc(32),
          addresses: [{ host: "10.9.9.9" }],
          consensusMember: true,
        },
      ],
    };
    await directory.write(old);
    const before = await stat(directory.fullPath);
    const values = new RoleserveValues();
    values.curatorConnection.set(cluster.connect(cluster.firstNode));
    const run = start(values, directory);
    try {
      await eventually(() => run.ctx.state === "healthy", "the worker healthy");
      expect(await listed(directory)).toEqual([["metropolis-old", "10.9.9.9"]]);
      expect((await stat(directory.fullPath)).mtimeMs).toBe(before.mtimeMs);
      // The node's own view (metrics discovery) is the cluster as it is: nobody.
      expect((await waitFor(values.clusterDirectory, () => true)).nodes).toEqual([]);
    } finally {
      await run.stop();
    }
  });

  it("points the node's curator connection at the consensus members of the records", async () => {
    const second = await cluster.addNode();
    const first = cluster.firstNode;
    const { host, port } = cluster.endpoint;
    await cluster.reportStatus(first, { externalAddress: host, runningCurator: { port } });
    await cluster.reportStatus(second, { externalAddress: "127.0.0.12" }); // no consensus role
    // Enrolled when a curator of the first node ran at 127.0.0.1:1, long gone.
    const connection = new CuratorConnection({
      endpoints: [{ host: "127.0.0.1", port: 1, nodeId: first.nodeId }, cluster.endpoint],
      ca: cluster.caPem,
      identity: credentialsPem(second),
    });
    const values = new RoleserveValues();
    values.curatorConnection.set({ credentials: second, connection });
    const run = startOnMock(
      "root.directory",
      directoryWorker(values, { directory: await directoryFile("endpoints"), curatorPort: port }),
    );
    const known = () =>
      connection.knownEndpoints.map((c) => `${c.nodeId}@${c.host}:${c.port}`).sort();
    try {
      await eventually(
        () => known().join() === `${first.nodeId}@${host}:${port}`,
        "the connection to know only the first node's curator",
      );

      // A node without the consensus role whose record claims a curator (written behind
      // the curator's back: it refuses such a status) is not asked.
      const kv = cluster.member.status.client.sub("curator").kv;
      const record = priv.Node.decode((await kv.get(`/nodes/${second.nodeId}`).buffer())!);
      record.status = common.NodeStatus.fromPartial({
        externalAddress: "127.0.0.12",
        runningCurator: { port: 17835 },
      });
      await kv.put(`/nodes/${second.nodeId}`).value(Buffer.from(priv.Node.encode(record).finish()));
      await eventually(
        async () => (await cluster.getNode(second.nodeId))?.status?.runningCurator?.port === 17835,
        "the forged record in place",
      );
      expect(known()).toEqual([`${first.nodeId}@${host}:${port}`]);

      // The owner makes it a consensus member: now it is one of the curators.
      await cluster.updateRoles(second.nodeId, { consensusMember: true });
      const both = [`${first.nodeId}@${host}:${port}`, `${second.nodeId}@127.0.0.12:${port}`];
      await eventually(
        () => known().join() === [...both].sort().join(),
        "the connection to know both consensus members",
      );
      expect(run.ctx.lines.map((l) => l.message).some((m) => m.includes(both[1]))).toBe(true);
    } finally {
      await run.stop();
      connection.close();
    }
  });

  it("lists the UP nodes with an address and follows the cluster", async () => {
    const first = cluster.firstNode;
    const second = await cluster.addNode();
    const standby = await cluster.addNode({ commit: false });
    const silent = await cluster.addNode(); // UP, never reports an address
    await cluster.reportStatus(first, { externalAddress: "127.0.0.11" });
    await cluster.reportStatus(second, { externalAddress: "127.0.0.12" });
    expect((await cluster.getNode(standby.nodeId))?.state).toBe(common.NodeState.STANDBY);
    expect((await cluster.getNode(silent.nodeId))?.state).toBe(common.NodeState.UP);

    const directory = await directoryFile("follow");
    const values = new RoleserveValues();
    values.curatorConnection.set(cluster.connect(second));
    const run = start(values, directory);
    const expected = (...nodes: [ClusterNode, string][]) =>
      nodes
        .map(([n, host]): [string, string] => [n.nodeId, host])
        .sort(([a], [b]) => (a < b ? -1 : 1));
    try {
      await eventually(() => run.ctx.state === "healthy", "the worker healthy");
      expect(await listed(directory)).toEqual(
        expected([first, "127.0.0.11"], [second, "127.0.0.12"]),
      );
      const stored = await directory.read();
      expect(Buffer.from(stored.nodes.find((n) => n.id === first.nodeId)!.publicKey)).toEqual(
        Buffer.from(first.publicKey),
      );

      // A node moves, another reports in.
      await cluster.reportStatus(second, { externalAddress: "127.0.0.22" });
      await cluster.reportStatus(silent, { externalAddress: "127.0.0.13" });
      const all = expected([first, "127.0.0.11"], [second, "127.0.0.22"], [silent, "127.0.0.13"]);
      await eventually(
        async () => JSON.stringify(await listed(directory)) === JSON.stringify(all),
        "the directory updated",
      );

      // A node is deleted (forcibly, while UP): it leaves the directory.
      await cluster.management((m) =>
        unaryCall<api.DeleteNodeRequest, api.DeleteNodeResponse>(m.deleteNode.bind(m), {
          node: { $case: "id", id: silent.nodeId },
          bypassHasRoles: true,
          bypassNodeUp: true,
        }),
      );
      const remaining = expected([first, "127.0.0.11"], [second, "127.0.0.22"]);
      await eventually(
        async () => JSON.stringify(await listed(directory)) === JSON.stringify(remaining),
        "the deleted node gone",
      );
    } finally {
      await run.stop();
    }
  });

  it("resumes its watch after a break: changes made meanwhile arrive; a deletion made meanwhile makes it watch afresh", async () => {
    const first = cluster.firstNode;
    const moving = await cluster.addNode();
    const leaving = await cluster.addNode();
    await cluster.reportStatus(first, { externalAddress: "127.0.0.41" });
    await cluster.reportStatus(moving, { externalAddress: "127.0.0.42" });
    await cluster.reportStatus(leaving, { externalAddress: "127.0.0.43" });
    const directory = await directoryFile("resume");
    const values = new RoleserveValues();
    values.curatorConnection.set(cluster.connect(first));
    // One worker, run again as the supervisor would: what it kept is what resumes.
    const worker = directoryWorker(values, { directory });
    const hostOf = async (id: string) =>
      (await listed(directory)).find(([n]) => n === id)?.[1] ?? "not listed";
    const healthyRun = async (what: string) => {
      const run = startOnMock("root.directory", worker);
      await eventually(() => run.ctx.state === "healthy", `${what}: the worker healthy`);
      return run;
    };

    const run1 = await healthyRun("first run");
    expect(await hostOf(leaving.nodeId)).toBe("127.0.0.43");
    await run1.stop();
    // A new leadership, as after a failover: its copy of the records is read afresh.
    await cluster.restartCurator();

    // Away: a node moves. The next run hears of it.
    await cluster.reportStatus(moving, { externalAddress: "127.0.0.52" });
    const run2 = await healthyRun("second run");
    await eventually(async () => (await hostOf(moving.nodeId)) === "127.0.0.52", "the move");
    await run2.stop();

    // Away: a node is deleted. A resumed backlog resends no deletions, but
    // the leader's count of nodes shows the view has one too many.
    await cluster.management((m) =>
      unaryCall<api.DeleteNodeRequest, api.DeleteNodeResponse>(m.deleteNode.bind(m), {
        node: { $case: "id", id: leaving.nodeId },
        bypassHasRoles: true,
        bypassNodeUp: true,
      }),
    );
    const stale = startOnMock("root.directory", worker);
    await expect(stale.result).rejects.toBeInstanceOf(StaleViewError);
    // The run after it (the supervisor's restart) watches afresh.
    const run4 = await healthyRun("the run after the stale view");
    await eventually(
      async () => (await hostOf(leaving.nodeId)) === "not listed",
      "the deleted node gone",
    );
    expect(await hostOf(moving.nodeId)).toBe("127.0.0.52");
    await run4.stop();
  });

  it("resumes with the revision and the etcd cluster ID it received; a token of another etcd cluster gets the full backlog, which replaces the view", async () => {
    // The etcd cluster the curator reads, as any etcd response header names it.
    const { header } = await cluster.member.status.client.kv.get("any").exec();
    const own = header.cluster_id;
    const { connection } = cluster.connect(cluster.firstNode);
    const signal = AbortSignal.timeout(20_000);
    const view = new ClusterView();
    /** Watches as `request` says until the view is complete; the backlog's last event. */
    const backlog = async (request: curator.WatchRequest) => {
      const { stream, first } = await openWatch(connection, request.kind, signal);
      try {
        let event = first;
        while (!view.apply(event)) event = await stream.next(signal);
        return event;
      } finally {
        stream.cancel();
      }
    };

    const fresh = await backlog(view.begin());
    expect(fresh.resumed).toBe(false);
    expect(fresh.etcdClusterId).toBe(own);
    expect(view.etcdClusterId).toBe(own);
    expect(view.nodes.has(cluster.firstNode.nodeId)).toBe(true);
    // What it sends back: the revision with the etcd cluster it belongs to.
    const again = view.begin();
    expect(again.kind).toEqual({
      $case: "nodesInCluster",
      nodesInCluster: { resumeFromRevision: view.revision, resumeEtcdClusterId: own },
    });
    expect((await backlog(again)).resumed).toBe(true);

    // A view of another etcd cluster, as a node holds that followed the
    // cluster before it was restored from a backup: a node written there
    // after the backup, which the restore lost.
    view.etcdClusterId = (BigInt(own) ^ 1n).toString();
    view.nodes.set("metropolis-lost", curator.Node.fromPartial({ id: "metropolis-lost" }));
    const replaced = await backlog(view.begin());
    expect(replaced.resumed).toBe(false);
    expect(view.nodes.has("metropolis-lost")).toBe(false);
    expect(view.nodes.has(cluster.firstNode.nodeId)).toBe(true);
    expect(view.etcdClusterId).toBe(own);
  });

  it("fails when its watch breaks", async () => {
    const values = new RoleserveValues();
    values.curatorConnection.set(cluster.connect(cluster.firstNode));
    const ctx = new MockContext("root.directory");
    // Its failure is caught from the start: the stream may also break before the restart
    // (a curator changing role rebuilds its listener), which is the same behaviour.
    const failure = directoryWorker(values, { directory: await directoryFile("break") })(ctx).then(
      () => undefined,
      (e: unknown) => e,
    );
    await eventually(() => ctx.state === "healthy", "the worker healthy");
    await cluster.restartCurator();
    expect(await failure).toBeInstanceOf(CuratorStreamError);
  });
});
