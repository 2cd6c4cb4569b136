/**
 * Grows the benchmark cluster's one etcd member into a quorum: the scale
 * simulator runs a 3-member etcd cluster, as a production control plane
 * does, so that every write the curator makes goes through raft between
 * processes (each member is a real etcd process on its own loopback address).
 */
import { join } from "node:path";
import {
  runTestMember,
  testNode,
  type TestMember,
  type TestMemberMode,
  type TestNode,
} from "@metropolis/consensus/testing";
import type { Cluster } from "../curator/cluster";

/** The members added, and their client sockets. */
export interface MoreMembers {
  /** Client sockets of every member, the cluster's first one included, in order. */
  sockets: string[];
  /** Stops the added members (the last first) and removes their directories. */
  stop(): Promise<void>;
}

const socketOf = (node: TestNode) =>
  join(node.storage.ephemeral.consensus.fullPath, "client.sock:0");

/**
 * Adds `count` voting members to `cluster`, with the `settings` of its first
 * member; resolves once all of them vote.
 */
export async function addMembers(
  cluster: Cluster,
  count: number,
  settings: TestMemberMode,
): Promise<MoreMembers> {
  const added: { node: TestNode; member?: TestMember }[] = [];
  const stop = async () => {
    for (const { node, member } of added.reverse()) {
      await member?.harness.cleanup({ timeoutMs: 20_000 }).catch(() => undefined);
      await node.remove();
    }
  };
  try {
    for (let i = 0; i < count; i++) {
      const node = await testNode(`bench-scale-${i}`);
      const entry: { node: TestNode; member?: TestMember } = { node };
      added.push(entry);
      const joined = await cluster.consensus.addNode(node.nodeId, node.publicKey, node.peer);
      entry.member = await runTestMember(node, { ...settings, join: joined });
      await votersOnly(cluster, 60_000);
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return { sockets: [cluster.socketPath, ...added.map((a) => socketOf(a.node))], stop };
}

/** Waits until no member of the cluster is a learner (the member autopromotes them). */
async function votersOnly(cluster: Cluster, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const members = await cluster.consensus.members();
    if (members.every((m) => !m.isLearner && m.name !== "")) return;
    if (Date.now() > deadline)
      throw new Error(
        `etcd members still learners after ${timeoutMs} ms: ${JSON.stringify(members)}`,
      );
    await new Promise((r) => setTimeout(r, 100));
  }
}
