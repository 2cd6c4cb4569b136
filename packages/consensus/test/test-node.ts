/**
 * A node's worth of state for consensus tests: an Ed25519 identity, a node
 * root in a temp directory with its data directory mounted, and a loopback
 * peer address of its own (a random 127.0.0.x and a free port, so that test
 * files can run in parallel).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { placeNodeRoot, type NodeRoot } from "@metropolis/localstorage";
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

async function freePort(host: string): Promise<number> {
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
