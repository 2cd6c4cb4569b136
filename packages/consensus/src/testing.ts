/**
 * @metropolis/consensus/testing — real etcd members for tests of this
 * package and the ones above it (curator, cluster, roleserve).
 *
 * `testNode()` is a node's worth of state: an Ed25519 identity, a node
 * root in a temp directory with its data directory mounted, and a loopback
 * peer address of its own (a random 127.0.0.x and a free port, so that test
 * files can run in parallel).
 *
 * `startEtcdCluster()` is bare etcd: N member processes on loopback, for
 * tests of what talks to etcd directly (values, elections, partitions).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "@metropolis/event";
import { placeNodeRoot, type NodeRoot } from "@metropolis/localstorage";
import { eventually, testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { localTimings } from "./etcd-flags";
import { ConsensusService, type ConsensusConfig } from "./service";
import type { ConsensusStatus } from "./status";
import { generateKeyPair, nodeIdFromPublicKey } from "@metropolis/pki";

export { snapshotMemberToFile } from "./snapshot-file";
export {
  startEtcdCluster,
  EtcdStartError,
  type EtcdCluster,
  type EtcdClusterOptions,
  type EtcdMember,
} from "./etcd-test-cluster";

export interface TestNode {
  nodeId: string;
  /** Ed25519 private key seed (32 bytes). */
  privateKey: Uint8Array;
  /** Raw Ed25519 public key (32 bytes). */
  publicKey: Uint8Array;
  dir: string;
  storage: NodeRoot;
  peer: { host: string; port: number };
  /** Places the node root again over the same directory, as a restarted node does. */
  reopen(): Promise<NodeRoot>;
  remove(): Promise<void>;
}

/** A port on `host` that nothing listens on right now. */
export async function freePort(host: string): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) =>
    server.once("error", reject).listen(0, host, resolve),
  );
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export async function testNode(name: string): Promise<TestNode> {
  const { privateKey, publicKey } = generateKeyPair();
  const nodeId = nodeIdFromPublicKey(publicKey);
  const dir = await mkdtemp(join(tmpdir(), `consensus-${name}-`));
  const host = `127.0.0.${2 + Math.floor(Math.random() * 250)}`;
  const peer = { host, port: await freePort(host) };
  let unlock: Awaited<ReturnType<NodeRoot["data"]["mountNew"]>> | undefined;
  const open = async (): Promise<NodeRoot> => {
    const storage = placeNodeRoot(dir);
    if (!unlock) unlock = await storage.data.mountNew("encrypted");
    else
      await storage.data.mountExisting({
        policy: "encrypted",
        nodeUnlockKey: unlock.nodeUnlockKey,
        clusterUnlockKey: unlock.clusterUnlockKey,
      });
    await storage.ephemeral.wipe();
    return storage;
  };
  return {
    nodeId,
    privateKey,
    publicKey,
    dir,
    storage: await open(),
    peer,
    reopen: open,
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

/** A consensus member running under its own test supervisor. */
export interface TestMember {
  service: ConsensusService;
  status: Extract<ConsensusStatus, { state: "running" }>;
  harness: TestHarness;
}

/**
 * Whether `dn` is a runnable that dies when the etcd of the consensus
 * service supervised at `serviceDn` does: etcd itself, and the followers
 * reading it (keyring, peer CRL), whose reads fail while it is gone. For a
 * test harness's `expectDeath` when a test stops or removes a member.
 */
export function diesWithEtcd(dn: string, serviceDn = "root.consensus"): boolean {
  return ["etcd", "keyring", "peercrl"].some((name) => dn === `${serviceDn}.${name}`);
}

/**
 * Runs a consensus member for `node` (bootstrapping a new cluster, joining
 * one, or restarting from disk) under a test harness, with local raft
 * timings; resolves once it serves. The caller cleans up with
 * `member.harness.cleanup()` and `node.remove()`.
 */
export async function runTestMember(
  node: TestNode,
  mode: TestMemberMode,
  opts: { expectEtcdDeath?: boolean } = {},
): Promise<TestMember> {
  const { service, harness } = startTestMember(node, mode, {
    // The followers reading this member's etcd (keyring, peer CRL) may die
    // with it too: a read while etcd restarts fails, and they are restarted.
    expectDeath: (dn) => opts.expectEtcdDeath === true && diesWithEtcd(dn),
  });
  try {
    const status = await waitFor(
      service.status,
      (s) => s.state === "running",
      AbortSignal.timeout(30_000),
    );
    await harness.waitFor("root.consensus", "healthy");
    return { service, status: status as TestMember["status"], harness };
  } catch (e) {
    await harness.cleanup().catch(() => undefined);
    throw e;
  }
}

/** How a test member starts: bootstrap, join or from disk, and any other setting of the service. */
export type TestMemberMode = Partial<
  Omit<ConsensusConfig, "nodeId" | "nodePrivateKey" | "storage" | "peer">
>;

/**
 * Starts a consensus member for `node` under a test harness, without waiting
 * for anything: for members that are not expected to serve (a restart on the
 * data of a removed or revoked member). `expectDeath` names the DNs allowed
 * to die (see `testHarness`).
 */
export function startTestMember(
  node: TestNode,
  mode: TestMemberMode = {},
  opts: { expectDeath?: (dn: string) => boolean } = {},
): { service: ConsensusService; harness: TestHarness } {
  const service = new ConsensusService({
    nodeId: node.nodeId,
    nodePrivateKey: node.privateKey,
    storage: node.storage,
    peer: node.peer,
    timings: localTimings,
    autopromoteIntervalMs: 100,
    ...mode,
  });
  const harness = testHarness(
    async (ctx) => {
      ctx.run("consensus", service.run);
      ctx.healthy();
      await ctx.untilAborted();
    },
    { expectDeath: opts.expectDeath },
  );
  return { service, harness };
}

/**
 * The test nodes and members of one test file, cleaned up together: every
 * member's harness stopped (the last started first), then every node's
 * directory removed.
 *
 *   const members = new TestMembers();
 *   afterEach(() => members.cleanup());
 *   const a = await members.node("a");
 *   const first = await members.run(a, { bootstrap: true });
 */
export class TestMembers {
  private readonly harnesses: TestHarness[] = [];
  private readonly nodes: TestNode[] = [];

  /** A new test node (see {@link testNode}), removed at cleanup. */
  async node(name: string): Promise<TestNode> {
    const node = await testNode(name);
    this.nodes.push(node);
    return node;
  }

  /** {@link runTestMember}, stopped at cleanup. */
  async run(
    node: TestNode,
    mode: TestMemberMode,
    opts: { expectEtcdDeath?: boolean } = {},
  ): Promise<TestMember> {
    return this.keep(await runTestMember(node, mode, opts));
  }

  /**
   * Joins `node` to the cluster `via` runs in, as a node given the consensus
   * role does: `via.status.addNode()` adds it as a learner, its member starts
   * with what that returned, and this waits until every member of the cluster
   * is a started voter (the autopromoter promoted it). Stopped at cleanup.
   */
  async join(
    via: Pick<TestMember, "status">,
    node: TestNode,
    opts: { expectEtcdDeath?: boolean } = {},
  ): Promise<TestMember> {
    const join = await via.status.addNode(node.nodeId, node.publicKey, node.peer);
    const member = await this.run(node, { join }, opts);
    await eventually(
      async () => (await via.status.members()).every((m) => !m.isLearner && m.name !== ""),
      `${node.nodeId} joined and every learner promoted`,
      { timeoutMs: 30_000 },
    );
    return member;
  }

  /** {@link startTestMember}, stopped at cleanup. */
  start(
    node: TestNode,
    mode: TestMemberMode = {},
    opts: { expectDeath?: (dn: string) => boolean } = {},
  ): { service: ConsensusService; harness: TestHarness } {
    return this.keep(startTestMember(node, mode, opts));
  }

  /** Stops `member` now (a node going down); cleanup will not stop it again. */
  async stop(member: { harness: TestHarness }): Promise<void> {
    const i = this.harnesses.indexOf(member.harness);
    if (i !== -1) this.harnesses.splice(i, 1);
    await member.harness.cleanup({ timeoutMs: 20_000 });
  }

  /** Stops every member, then removes every node. */
  async cleanup(): Promise<void> {
    for (const h of this.harnesses.splice(0).reverse()) await h.cleanup({ timeoutMs: 20_000 });
    for (const n of this.nodes.splice(0)) await n.remove();
  }

  private keep<T extends { harness: TestHarness }>(member: T): T {
    this.harnesses.push(member.harness);
    return member;
  }
}
