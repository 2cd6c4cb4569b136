/**
 * Enrolment refuses bad input with an error naming the problem, and leaves
 * the node's storage as it was: a wrong ticket, a CA the cluster's curators
 * do not match, a corrupt sealed configuration; and a node the cluster
 * deleted stops (on its next start, or at once if it runs); one the owner
 * decommissioned with a wipe stops once its heartbeat acknowledged it, with
 * NodeWipeOrderedError (metropolis-node erases the storage, not the manager).
 */
import { readFile, rm, writeFile } from "node:fs/promises";
import { CertificateAuthority } from "@metropolis/pki";
import { api, common } from "@metropolis/proto";
import { eventually } from "@metropolis/supervisor/testing";
import { SealedCorruptedError } from "@metropolis/localstorage";
import {
  ClusterCaMismatchError,
  ClusterRefusedError,
  DisownedError,
  NodeDeletedError,
  NodeWipeOrderedError,
  SealedConfigurationMissingError,
} from "../src/errors";
import { homeOf, loopbackNet, TestClusterNode, TestOwner, type NodeRun } from "./cluster-fixture";

jest.setTimeout(60_000);

const address = loopbackNet();
const owner = new TestOwner();
const nodes: TestClusterNode[] = [];
let params: api.NodeParameters_ClusterRegister;

async function newNode(host: number): Promise<TestClusterNode> {
  const node = await TestClusterNode.create(address(host));
  nodes.push(node);
  return node;
}

/** The IDs and states of every node the cluster has a record of, in order. */
async function nodeRecords(): Promise<string[]> {
  return (await owner.nodes()).map((n) => `${n.id} ${common.NodeState[n.state]}`).sort();
}

/**
 * Stops a run whose enrolment failed: the harness reports the enrolment's
 * death (and only that) as unexpected, which here it is not.
 */
async function stopFailed(node: TestClusterNode, run: NodeRun): Promise<void> {
  const error = await run.harness.cleanup({ timeoutMs: 15_000 }).catch((e: unknown) => e);
  expect(String(error)).toMatch(/unexpected failure: root\.enrolment: /);
  node.run = undefined;
}

function register(changes: Partial<api.NodeParameters_ClusterRegister>): api.NodeParameters {
  return { cluster: { $case: "clusterRegister", clusterRegister: { ...params, ...changes } } };
}

beforeAll(async () => {
  const first = await newNode(1);
  const home = await homeOf(await first.start(owner.bootstrapParameters()));
  await owner.takeOwnership({ host: first.address, port: 7835 }, home.credentials!.caCertificate);
  const p = await owner.registerParameters();
  if (p.cluster?.$case !== "clusterRegister") throw new Error("no register parameters");
  params = p.cluster.clusterRegister;
});

afterAll(async () => {
  owner.close();
  for (const n of nodes) await n.remove();
});

describe("enrolment refuses", () => {
  it("a wrong register ticket, and seals nothing", async () => {
    const node = await newNode(2);
    const run = await node.start(register({ registerTicket: Buffer.alloc(32, 7) }));
    const error = await homeOf(run).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ClusterRefusedError);
    expect((error as Error).message).toMatch(
      /RegisterNode: the cluster refused: PERMISSION_DENIED/,
    );
    expect(await node.storage().esp.metropolis.sealedConfiguration.exists()).toBe(false);
  });

  it("a CA certificate the cluster's curators do not match", async () => {
    const forged = await CertificateAuthority.create();
    const node = await newNode(3);
    const run = await node.start(register({ caCertificate: forged.certificate.der }));
    const error = await homeOf(run).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ClusterCaMismatchError);
    expect((error as Error).message).toMatch(/CA certificate is wrong or forged/);
    expect(await node.storage().esp.metropolis.sealedConfiguration.exists()).toBe(false);
  });

  it("a corrupt sealed configuration, and keeps it rather than enrolling afresh", async () => {
    const node = await newNode(4);
    const sealed = node.storage().esp.metropolis.sealedConfiguration;
    await node.storage().esp.metropolis.mkdirAll();
    await writeFile(sealed.fullPath, Buffer.from("not a sealed configuration"));
    // Register parameters are there too: a node that already belongs to a
    // cluster must not register again because its sealed configuration broke.
    const error = await homeOf(await node.start(register({}))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SealedCorruptedError);
    expect((error as Error).message).toContain(sealed.fullPath);
    expect((await readFile(sealed.fullPath)).toString()).toBe("not a sealed configuration");
    expect(
      await node
        .storage()
        .data.node.credentials.certificate.exists()
        .catch(() => false),
    ).toBe(false);
  });

  it("rejoining after the cluster deleted the node: DISOWNING, and the refusal", async () => {
    const node = await newNode(5);
    const run = await node.start(register({}));
    const pending = await eventually(
      async () => (await owner.nodes()).find((n) => n.state === common.NodeState.NEW),
      "the node to register",
    );
    await owner.approve(pending.id);
    await homeOf(run);
    await node.stop();
    await owner.deleteNode(pending.id);

    const again = await node.start();
    // Waiting for HOME ends on DISOWNING; enrolment fails with the refusal.
    await expect(homeOf(again)).rejects.toBeInstanceOf(DisownedError);
    const error = await again.manager.failure.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ClusterRefusedError);
    expect((error as Error).message).toMatch(/JoinNode: the cluster refused/);
    expect((await again.manager.status.watch().get()).state).toBe(common.ClusterState.DISOWNING);
    expect(await node.storage().esp.metropolis.sealedConfiguration.exists()).toBe(true);
  });

  it("a running node the owner deletes: DISOWNING, and the node run ends", async () => {
    const node = await newNode(6);
    const run = await node.start(register({}));
    const pending = await eventually(
      async () =>
        (await owner.nodes()).find(
          (n) => n.state === common.NodeState.NEW && n.status?.externalAddress !== "",
        ),
      "the node to register",
    );
    await owner.approve(pending.id);
    const home = await homeOf(run);
    expect(home.state).toBe(common.ClusterState.HOME);

    await owner.deleteNode(pending.id);
    const error = await run.manager.failure.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NodeDeletedError);
    // Told by the tombstone on its watch of itself, or, when that watch was
    // not open yet, by the refusal to open it.
    expect((error as Error).message).toMatch(
      new RegExp(
        `^node ${pending.id} is no longer part of its cluster ` +
          "\\((the owner deleted it while it ran|the cluster refused it: .*PERMISSION_DENIED.*)\\); " +
          "to use this machine again, wipe its storage and register it as a new node$",
      ),
    );
    expect((await run.manager.status.watch().get()).state).toBe(common.ClusterState.DISOWNING);
    // Its sealed configuration is left as it was: wiping is the operator's decision.
    expect(await node.storage().esp.metropolis.sealedConfiguration.exists()).toBe(true);
  });

  it("a running node decommissioned with a wipe: acknowledged, DISOWNING, NodeWipeOrderedError", async () => {
    const node = await newNode(9);
    const known = new Set((await owner.nodes()).map((n) => n.id));
    const run = await node.start(register({}));
    const pending = await eventually(
      async () =>
        (await owner.nodes()).find((n) => !known.has(n.id) && n.status?.externalAddress !== ""),
      "the node to register",
    );
    await owner.approve(pending.id);
    await homeOf(run);

    const res = await owner.decommission(pending.id, true);
    expect(res).toMatchObject({ wipeRequested: true, wipeAcknowledged: true });
    const error = await run.manager.failure.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NodeWipeOrderedError);
    expect(error).toMatchObject({
      nodeId: pending.id,
      acknowledged: true,
      message: `node ${pending.id} was decommissioned by its cluster, whose record of it asks it to wipe its storage (acknowledged to the curator)`,
    });
    expect((await run.manager.status.watch().get()).state).toBe(common.ClusterState.DISOWNING);
    // The manager erases nothing itself: metropolis-node does, once the tree stopped.
    expect(await node.storage().esp.metropolis.sealedConfiguration.exists()).toBe(true);
  });

  it("a missing sealed configuration on a node that holds data, before it speaks to the cluster", async () => {
    const node = await newNode(7);
    const known = new Set((await owner.nodes()).map((n) => n.id));
    const run = await node.start(register({}));
    const pending = await eventually(
      async () => (await owner.nodes()).find((n) => !known.has(n.id)),
      "the node to register",
    );
    await owner.approve(pending.id);
    await homeOf(run);
    await node.stop();
    const storage = node.storage();
    const sealed = storage.esp.metropolis.sealedConfiguration.fullPath;
    const directory = await readFile(storage.esp.metropolis.clusterDirectory.fullPath);
    await rm(sealed);
    const before = await nodeRecords();

    // Each start would register anew (a ghost NEW record every time); bootstrap parameters
    // must not set up anything either.
    const attempts = [register({}), register({}), register({}), owner.bootstrapParameters()];
    for (const parameters of attempts) {
      const again = await node.start(parameters);
      const error = await again.manager.failure.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SealedConfigurationMissingError);
      expect((error as Error).message).toContain(sealed);
      expect((error as Error).message).toContain(storage.data.fullPath);
      // It never got as far as FOREIGN, the state a node registers in.
      expect((await again.manager.status.watch().get()).state).toBe(common.ClusterState.UNKNOWN);
      await stopFailed(node, again);
    }
    expect(await nodeRecords()).toEqual(before);
    expect(await node.storage().esp.metropolis.sealedConfiguration.exists()).toBe(false);
    expect(await readFile(storage.esp.metropolis.clusterDirectory.fullPath)).toEqual(directory);
  });
});
