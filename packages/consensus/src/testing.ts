/**
 * @metropolis/consensus/testing — real etcd members for tests of this
 * package and the ones above it (curator, cluster, roleserve).
 *
 * `testNode()` is a node's worth of state: an Ed25519 identity, a node
 * root in a temp directory with its data directory mounted, and a loopback
 * peer address of its own (a random 127.0.0.x and a free port, so that test
 * files can run in parallel).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "@metropolis/event";
import { placeNodeRoot, type NodeRoot } from "@metropolis/localstorage";
import { testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { localTimings } from "./etcd-flags";
import { ConsensusService } from "./service";
import type { ConsensusStatus, JoinCluster } from "./status";
import { generateKeyPair, nodeIdFromPublicKey } from "@metropolis/pki";

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
 * Runs a consensus member for `node` (bootstrapping a new cluster, joining
 * one, or restarting from disk) under a test harness, with local raft
 * timings; resolves once it serves. The caller cleans up with
 * `member.harness.cleanup()` and `node.remove()`.
 */
export async function runTestMember(
  node: TestNode,
  mode: { bootstrap?: boolean; join?: JoinCluster },
  opts: { expectEtcdDeath?: boolean } = {},
): Promise<TestMember> {
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
    { expectDeath: (dn) => opts.expectEtcdDeath === true && dn === "root.consensus.etcd" },
  );
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
