/**
 * memberClient against a real member: clients share one connection to it
 * unless one asks for connections of its own (the curator's election lease
 * does, so that its keepalives do not queue behind the leader's traffic).
 */
import { readdirSync, readlinkSync } from "node:fs";
import type { Etcd3 } from "etcd3";
import { memberClient } from "@metropolis/consensus";
import {
  runTestMember,
  testNode,
  type TestMember,
  type TestNode,
} from "@metropolis/consensus/testing";

let node: TestNode;
let member: TestMember;
const clients: Etcd3[] = [];

beforeAll(async () => {
  node = await testNode("etcd-client");
  member = await runTestMember(node, { bootstrap: true });
});
afterAll(async () => {
  for (const c of clients) c.close();
  await member.harness.cleanup();
  await node.remove();
});

/** The sockets this process holds open (its unix connections to etcd among them), by inode. */
function openSockets(): Set<string> {
  const sockets = new Set<string>();
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      if (target.startsWith("socket:")) sockets.add(target);
    } catch {
      // closed between the listing and the read
    }
  }
  return sockets;
}

/**
 * The fewest sockets `step` opened in three tries. The test process holds
 * other sockets, which open and close on their own (the test member's
 * service has clients of its own): a difference of counts once came out one
 * less, and a single try once counted one more. Others can only add to a
 * try, so the least of three is what the step itself opened.
 */
async function socketsOpenedBy(step: () => Promise<unknown>): Promise<number> {
  let fewest = Infinity;
  for (let i = 0; i < 3; i++) {
    const before = openSockets();
    await step();
    fewest = Math.min(fewest, [...openSockets()].filter((s) => !before.has(s)).length);
  }
  return fewest;
}

/** A client of the test member, closed after the tests, that has answered once (so it is connected). */
async function connected(options?: { dedicated?: boolean }): Promise<Etcd3> {
  const client = memberClient(member.status.clientSocket, options);
  clients.push(client);
  await client.get("probe").string();
  return client;
}

describe("memberClient", () => {
  it("shares the member's connection unless asked for one of its own", async () => {
    await connected();
    expect(await socketsOpenedBy(() => connected())).toBe(0);
    expect(await socketsOpenedBy(() => connected({ dedicated: true }))).toBe(1);
  });
});
