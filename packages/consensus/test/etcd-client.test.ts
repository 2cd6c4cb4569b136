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

/** The sockets this process holds open (its unix connections to etcd among them). */
function openSockets(): number {
  return readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`).startsWith("socket:");
    } catch {
      return false; // closed between the listing and the read
    }
  }).length;
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
    const before = openSockets();
    await connected();
    expect(openSockets()).toBe(before);
    await connected({ dedicated: true });
    expect(openSockets()).toBe(before + 1);
  });
});
