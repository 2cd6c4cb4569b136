/**
 * The role fetch worker: persisted roles are published before any curator is
 * reachable (the cold start of a whole cluster depends on it), then the
 * curator's roles replace them, are persisted, and are published only when
 * they change; a broken watch fails the worker; a deletion or decommission
 * of the node is passed on.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "@metropolis/event";
import { dir, file, place, protobufCodec } from "@metropolis/localstorage";
import { common } from "@metropolis/proto";
import { MockContext, startOnMock, eventually } from "@metropolis/supervisor/testing";
import { CuratorStreamError } from "../src/errors";
import { roleFetchWorker } from "../src/rolefetch";
import { RoleserveValues } from "../src/values";
import { startTestCluster, type TestCluster } from "./curator-fixture";

let cluster: TestCluster;
let tmp: string;
beforeAll(async () => {
  cluster = await startTestCluster();
  tmp = await mkdtemp(join(tmpdir(), "roleserve-rolefetch-"));
});
afterAll(async () => {
  await cluster?.stop();
  await rm(tmp, { recursive: true, force: true });
});

/** A roles file of its own, declared as the node root declares `data.node.roles`. */
async function rolesFile(name: string) {
  const root = place(
    dir({ node: dir({ roles: file("roles.pb", { codec: protobufCodec(common.NodeRoles) }) }) }),
    join(tmp, name),
  );
  await root.mkdirAll();
  return root.node.roles;
}

const roleNames = (r: common.NodeRoles) =>
  [
    r.consensusMember && "consensus",
    r.kubernetesController && "controller",
    r.kubernetesWorker && "worker",
  ].filter(Boolean);

/** Runs the worker under a MockContext; `stop()` aborts it and returns how it ended. */
function start(values: RoleserveValues, roles: Awaited<ReturnType<typeof rolesFile>>) {
  return startOnMock("root.rolefetch", roleFetchWorker(values, { roles }));
}

describe("roleFetchWorker", () => {
  it("publishes the persisted roles at once, with no curator anywhere", async () => {
    const roles = await rolesFile("cold");
    await roles.write({
      consensusMember: common.NodeRoles_ConsensusMember.create(),
      kubernetesController: {},
    });
    const values = new RoleserveValues();
    const run = start(values, roles);
    try {
      const published = await waitFor(values.localRoles, () => true, AbortSignal.timeout(5000));
      expect(roleNames(published)).toEqual(["consensus", "controller"]);
      // Not healthy: the curator has not confirmed them.
      expect(run.ctx.state).toBe("new");
    } finally {
      await run.stop();
    }
  });

  it("follows the curator's roles, persisting and publishing only changes", async () => {
    const node = await cluster.addNode();
    await cluster.updateRoles(node.nodeId, { kubernetesWorker: true });
    const roles = await rolesFile("follow");
    // Stale roles from an earlier life: published first, then replaced.
    await roles.write({ kubernetesController: {} });
    const values = new RoleserveValues();
    const sets = jest.spyOn(values.localRoles, "set");
    const run = start(values, roles);
    try {
      await waitFor(values.localRoles, () => true, AbortSignal.timeout(5000));
      values.curatorConnection.set(cluster.connect(node));
      await eventually(() => run.ctx.state === "healthy", "the worker healthy");
      expect(sets.mock.calls.map(([r]) => roleNames(r))).toEqual([["controller"], ["worker"]]);
      expect(roleNames(await roles.read())).toEqual(["worker"]);

      // A change of the node that is not a change of roles: not published.
      await cluster.reportStatus(node, { externalAddress: "127.0.0.9" });
      // A change of roles: persisted and published.
      await cluster.updateRoles(node.nodeId, { kubernetesWorker: false });
      await eventually(() => sets.mock.calls.length === 3, "the role taken away");
      expect(roleNames(sets.mock.calls[2][0])).toEqual([]);
      // No roles are persisted as no file (an empty .pb file would not read back).
      expect(await roles.exists()).toBe(false);
      // The status update came before it on the stream; had it been
      // published, it would be call 3.
      expect(sets.mock.calls.map(([r]) => roleNames(r))).toEqual([["controller"], ["worker"], []]);
    } finally {
      await run.stop();
    }
  });

  it("does not announce the same roles again after a restart, nor read them from disk again", async () => {
    const node = await cluster.addNode();
    await cluster.updateRoles(node.nodeId, { kubernetesWorker: true });
    const roles = await rolesFile("restart");
    const values = new RoleserveValues();
    values.curatorConnection.set(cluster.connect(node));
    const sets = jest.spyOn(values.localRoles, "set");
    const looks = jest.spyOn(roles, "exists");
    const worker = roleFetchWorker(values, { roles });
    for (let run = 0; run < 2; run++) {
      const ctx = new MockContext("root.rolefetch");
      const result = worker(ctx);
      await eventually(() => ctx.state === "healthy", "the worker healthy");
      ctx.abort();
      await result;
    }
    // Run 2 had the same roles from the curator: nothing new to announce, and
    // the disk holds what run 1 wrote, which only this worker writes.
    expect(sets).toHaveBeenCalledTimes(1);
    expect(looks).toHaveBeenCalledTimes(1);
  });

  it("ignores a corrupted roles file and replaces it with the curator's roles", async () => {
    const node = await cluster.addNode();
    await cluster.updateRoles(node.nodeId, { kubernetesWorker: true });
    const roles = await rolesFile("corrupt");
    await writeFile(roles.fullPath, Buffer.from([0xff, 0xff, 0xff]));
    const values = new RoleserveValues();
    values.curatorConnection.set(cluster.connect(node));
    const run = start(values, roles);
    try {
      await eventually(() => run.ctx.state === "healthy", "the worker healthy");
      expect(run.ctx.lines.some((l) => l.level === "warn" && /ignoring/.test(l.message))).toBe(
        true,
      );
      expect(roleNames(await roles.read())).toEqual(["worker"]);
      expect(roleNames(await waitFor(values.localRoles, () => true))).toEqual(["worker"]);
    } finally {
      await run.stop();
    }
  });

  it("fails when its watch breaks, and the node's connection hears of it", async () => {
    const node = await cluster.addNode();
    const values = new RoleserveValues();
    const connected = cluster.connect(node);
    const told = jest.spyOn(connected.connection, "leaderFailed");
    values.curatorConnection.set(connected);
    const ctx = new MockContext("root.rolefetch");
    // Its failure is caught from the start: the stream may also break before the restart
    // (a curator changing role rebuilds its listener), which is the same behaviour.
    const failure = roleFetchWorker(values, { roles: await rolesFile("break") })(ctx).then(
      () => undefined,
      (e: unknown) => e,
    );
    await eventually(() => ctx.state === "healthy", "the worker healthy");
    await cluster.restartCurator();
    const error = await failure;
    expect(error).toBeInstanceOf(CuratorStreamError);
    // So that the restarted worker's call looks for the leader, not at the one gone.
    expect(told).toHaveBeenCalledWith(expect.anything(), error);
  });

  it("passes on that the cluster deleted this node: its tombstone, or a refused watch", async () => {
    const node = await cluster.addNode();
    await cluster.updateRoles(node.nodeId, { kubernetesWorker: true });
    const values = new RoleserveValues();
    values.curatorConnection.set(cluster.connect(node));
    const disowned = jest.spyOn(values.disowned, "set");
    const roles = jest.spyOn(values.localRoles, "set");
    const run = start(values, await rolesFile("deleted"));
    try {
      await eventually(() => run.ctx.state === "healthy", "the worker healthy");
      expect(disowned).not.toHaveBeenCalled();
      await cluster.deleteNode(node.nodeId);
      await eventually(() => disowned.mock.calls.length > 0, "the deletion passed on");
      expect(disowned.mock.calls).toEqual([["the owner deleted it while it ran"]]);
      // The roles stay: what to stop is the cluster manager's call.
      expect(roles.mock.calls.map(([r]) => roleNames(r))).toEqual([["worker"]]);
    } finally {
      await run.stop();
    }

    // A node that was away when it was deleted learns it from the refusal.
    const later = new RoleserveValues();
    later.curatorConnection.set(cluster.connect(node));
    const refused = jest.spyOn(later.disowned, "set");
    const ctx = new MockContext("root.rolefetch");
    const error = await roleFetchWorker(later, { roles: await rolesFile("deleted-later") })(
      ctx,
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CuratorStreamError);
    expect(refused.mock.calls).toEqual([
      [
        expect.stringMatching(
          /^the cluster refused it: Curator.Watch: stream failed: 16 UNAUTHENTICATED: client certificate .* was revoked/,
        ),
      ],
    ]);
  });

  it("passes on that the cluster decommissioned this node, from its record, with its roles gone", async () => {
    const node = await cluster.addNode();
    await cluster.updateRoles(node.nodeId, { kubernetesWorker: true });
    const values = new RoleserveValues();
    values.curatorConnection.set(cluster.connect(node));
    const disowned = jest.spyOn(values.disowned, "set");
    const roles = jest.spyOn(values.localRoles, "set");
    const run = start(values, await rolesFile("decommissioned"));
    try {
      await eventually(() => run.ctx.state === "healthy", "the worker healthy");
      await cluster.decommissionNode(node.nodeId);
      await eventually(() => disowned.mock.calls.length > 0, "the decommission passed on");
      expect(disowned.mock.calls[0]).toEqual(["the owner decommissioned it"]);
      // Its roles went first, and were published.
      expect(roles.mock.calls.map(([r]) => roleNames(r))).toEqual([["worker"], []]);
    } finally {
      await run.stop();
    }
  });
});
