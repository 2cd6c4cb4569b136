/**
 * Enrolment end to end, in process: a node bootstraps a cluster and reaches
 * HOME; a second registers, is approved by the owner and reaches HOME; it
 * gets the consensus role (joins etcd, runs a curator follower) and the
 * worker role (runs its declared workload), loses them again, and comes back
 * after a restart through join. Real etcd, real curators, real mTLS gRPC.
 * Along the way each node reports its progress as typed events (the local
 * cluster and the e2e tests wait on them): they are checked here.
 */
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { memberDataPath } from "@metropolis/consensus";
import { waitFor } from "@metropolis/event";
import { common } from "@metropolis/proto";
import { type NodeProgressEvent, readProgressEvent } from "@metropolis/supervisor/node-progress";
import { eventually } from "@metropolis/supervisor/testing";
import { homeOf, loopbackNet, TestClusterNode, TestOwner, type NodeRun } from "./cluster-fixture";

jest.setTimeout(120_000);

const address = loopbackNet();
const owner = new TestOwner();
let first: TestClusterNode;
let second: TestClusterNode;
let firstRun: NodeRun;
let secondRun: NodeRun;
let secondId: string;

/** The progress events `run`'s node has logged so far, in order. */
function progressOf(run: NodeRun): NodeProgressEvent[] {
  return run.harness.supervisor.logs("root").flatMap((l) => readProgressEvent(l.meta) ?? []);
}

/** Waits until `run`'s node has logged progress event `expected`. */
async function reports(run: NodeRun, expected: NodeProgressEvent): Promise<void> {
  await eventually(
    () => progressOf(run).some((e) => isDeepStrictEqual(e, expected)),
    `progress event ${JSON.stringify(expected)}`,
  );
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

beforeAll(async () => {
  first = await TestClusterNode.create(address(1));
  const pidFile = join(first.dir, "second-workload.pid");
  second = await TestClusterNode.create(address(2), [
    {
      name: "sleeper",
      command: process.execPath,
      args: [
        "-e",
        `require("fs").writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => {}, 1000)`,
      ],
    },
  ]);
});

afterAll(async () => {
  owner.close();
  await second?.remove();
  await first?.remove();
});

describe("enrolment", () => {
  it("bootstraps a cluster: the first node reaches HOME with credentials and local consensus", async () => {
    // An initial configuration with a heartbeat timeout, the storage policy left to the default.
    firstRun = await first.start(
      owner.bootstrapParameters(
        common.ClusterConfiguration.fromPartial({ heartbeatTimeoutMs: 20_000 }),
      ),
    );
    const home = await homeOf(firstRun);
    expect(home.credentials?.nodeId).toMatch(/^metropolis-[0-9a-f]{32}$/);
    // Bootstrapped: a later run of its control plane follows its roles like any node's.
    await waitFor(firstRun.roleserver.values.bootstrapData, (b) => b === undefined);
    const withConsensus = await waitFor(firstRun.manager.status, (s) => s.hasLocalConsensus);
    await withConsensus.consensusClient("curator").kv.get("probe").string();

    const nodeId = home.credentials!.nodeId;
    // It announced its ID before it had created the cluster, then its member and curator leader.
    await reports(firstRun, { event: "cluster.enrolled", nodeId, flow: "bootstrap" });
    await reports(firstRun, { event: "consensus.serving", nodeId });
    await reports(firstRun, {
      event: "curator.leading",
      nodeId,
      address: `${first.address}:7835`,
    });
    const events = progressOf(firstRun).map((e) => e.event);
    expect(events.indexOf("cluster.enrolled")).toBeLessThan(events.indexOf("curator.leading"));

    await owner.takeOwnership({ host: first.address, port: 7835 }, home.credentials!.caCertificate);
    const nodes = await owner.nodes();
    expect(nodes.map((n) => [n.id, n.state, n.labels])).toEqual([
      [home.credentials!.nodeId, common.NodeState.UP, new Map([["site", "first"]])],
    ]);
    expect((await owner.clusterInfo()).clusterConfiguration).toEqual({
      storagePolicy: common.StoragePolicy.ENCRYPTED,
      heartbeatTimeoutMs: 20_000,
    });
  });

  it("registers a second node, which reaches HOME once the owner approves it", async () => {
    secondRun = await second.start(await owner.registerParameters());
    const pending = await eventually(
      async () => (await owner.nodes()).find((n) => n.state === common.NodeState.NEW),
      "the second node to register",
    );
    await waitFor(secondRun.manager.status, (s) => s.state === common.ClusterState.FOREIGN);
    await owner.approve(pending.id);
    const home = await homeOf(secondRun);
    secondId = home.credentials!.nodeId;
    expect(secondId).toBe(pending.id);
    expect(home.hasLocalConsensus).toBe(false);
    await reports(secondRun, {
      event: "cluster.enrolled",
      nodeId: secondId,
      flow: "register",
    });
    // Its status reaches the cluster, and heartbeats make it healthy.
    await eventually(async () => {
      const node = (await owner.nodes()).find((n) => n.id === secondId);
      return (
        node?.status?.externalAddress === second.address &&
        node.health === common.NodeHealth.HEALTHY
      );
    }, "the second node to report its address and be healthy");
    await reports(secondRun, {
      event: "status.pushed",
      address: second.address,
      curatorPort: null,
    });
  });

  it("runs a consensus member and a curator follower while it holds the consensus role", async () => {
    await owner.setRoles(secondId, { consensusMember: true });
    const controlPlane = await waitFor(
      secondRun.roleserver.values.localControlPlane,
      (c) => c !== undefined,
    );
    expect(controlPlane!.curatorPort).toBe(7835);
    const status = await waitFor(secondRun.manager.status, (s) => s.hasLocalConsensus);
    await status.consensusClient("curator").kv.get("probe").string();
    const leader = await waitFor(controlPlane!.curator.leader, (l) => l !== undefined);
    expect(leader!.nodeId).not.toBe(secondId);
    await eventually(async () => {
      const members = await controlPlane!.consensus.members();
      return members.length === 2 && members.every((m) => !m.isLearner);
    }, "the second member to be promoted");
    // The first node's autopromoter (on the etcd leader) did it, and said so.
    await reports(firstRun, { event: "consensus.promoted", nodeId: secondId });
    await reports(secondRun, { event: "consensus.serving", nodeId: secondId });
    await reports(secondRun, {
      event: "status.pushed",
      address: second.address,
      curatorPort: 7835,
    });

    await owner.setRoles(secondId, { consensusMember: false });
    await waitFor(secondRun.roleserver.values.localControlPlane, (c) => c === undefined);
    await waitFor(secondRun.manager.status, (s) => !s.hasLocalConsensus);
    const withCurator = progressOf(secondRun).findLastIndex(
      (e) => e.event === "status.pushed" && e.curatorPort !== null,
    );
    await eventually(
      () =>
        progressOf(secondRun)
          .slice(withCurator)
          .some((e) => e.event === "status.pushed" && e.curatorPort === null),
      "the second node to push a status without a curator",
    );
    const firstStatus = await waitFor(firstRun.manager.status, (s) => s.hasLocalConsensus);
    const firstPlane = await waitFor(firstRun.roleserver.values.localControlPlane, (c) => !!c);
    expect(firstStatus.hasLocalConsensus).toBe(true);
    await eventually(
      async () => (await firstPlane!.consensus.members()).length === 1,
      "the removed member to leave etcd",
    );
    // Its etcd data goes once its own etcd reported the removal, not before.
    const member = memberDataPath(second.storage());
    await eventually(
      async () =>
        !(await stat(member).then(
          () => true,
          () => false,
        )),
      "the removed member's etcd data to go",
      // The launcher's next run starts the member from its data once the
      // last run's children (the curator too) have ended, and etcd learns of
      // its removal from its peer's answer: generous for a loaded CI machine.
      { timeoutMs: 60_000 },
    );
    expect(
      secondRun.harness.supervisor.logs("root.roleserver.controlplane").map((l) => l.message),
    ).toContain("etcd reported this member's removal from the cluster: removed its etcd data");
  });

  it("runs the declared workloads while it holds the worker role", async () => {
    const pidFile = join(first.dir, "second-workload.pid");
    await owner.setRoles(secondId, { kubernetesWorker: true });
    await waitFor(secondRun.roleserver.values.workloadStatus, (w) => w.running);
    const pid = await eventually(
      async () => Number(await readFile(pidFile, "utf8")) || undefined,
      "the workload to write its pid",
    );
    expect(alive(pid)).toBe(true);
    await owner.setRoles(secondId, { kubernetesWorker: false });
    await waitFor(secondRun.roleserver.values.workloadStatus, (w) => !w.running);
    await eventually(() => !alive(pid), "the workload process to stop");
  });

  it("comes back HOME after a restart, through join", async () => {
    await second.stop();
    secondRun = await second.start();
    const home = await homeOf(secondRun);
    expect(home.credentials?.nodeId).toBe(secondId);
    await reports(secondRun, {
      event: "cluster.enrolled",
      nodeId: secondId,
      flow: "rejoin",
    });
  });
});
