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
 * The sockets opened while `step` ran. Not a difference of counts: a socket
 * of something else closing meanwhile (the test process holds others) made
 * one CI run count one less.
 */
async function socketsOpenedBy(step: () => Promise<unknown>): Promise<number> {
  const before = openSockets();
  await step();
  return [...openSockets()].filter((s) => !before.has(s)).length;
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
