/**
 * The leader's shared watch of node records (node-record-feed.ts) against a
 * real one-member etcd (startLeader of @metropolis/curator/testing): each
 * node's subscriptions get that node's changes, once, from the revision they
 * were started at; the shared watch goes with the last subscription and
 * comes back with the next.
 */
import type { IKeyValue } from "etcd3";
import { nodeKey } from "../src/keys";
import { NodeRecordFeed, type NodeRecordSubscription } from "../src/node-record-feed";
import { startLeader, type LeaderFixture } from "@metropolis/curator/testing";
import { eventually } from "@metropolis/supervisor/testing";

let leader: LeaderFixture;

beforeAll(async () => {
  leader = await startLeader();
}, 30_000);

afterAll(async () => {
  await leader?.stop();
});

/** The puts and deletes a subscription emits, as the records' mod revisions. */
function recorded(s: NodeRecordSubscription): { puts: string[]; deletes: string[] } {
  const seen = { puts: [] as string[], deletes: [] as string[] };
  s.on("put", (e: IKeyValue) => seen.puts.push(e.mod_revision));
  s.on("delete", (e: IKeyValue) => seen.deletes.push(e.mod_revision));
  return seen;
}

/** Changes node `id`'s labels and returns the record's new mod revision. */
async function touch(id: string, value: string): Promise<string> {
  await leader.updateNode(id, (n) => ({ ...n, labels: new Map([["touched", value]]) }));
  const res = await leader.ctx.kv.get(nodeKey(id)).exec();
  return res.kvs[0].mod_revision;
}

/** The current etcd revision. */
async function revisionNow(): Promise<string> {
  return (await leader.ctx.kv.get(nodeKey("none")).exec()).header.revision;
}

describe("NodeRecordFeed", () => {
  it("gives each node's subscriptions that node's changes only, once each", async () => {
    const feed = new NodeRecordFeed(leader.ctx);
    const a = await leader.addNode();
    const b = await leader.addNode();
    const subs = [await feed.subscribe(a.nodeId), await feed.subscribe(a.nodeId)];
    const other = await feed.subscribe(b.nodeId);
    const now = await revisionNow();
    for (const s of [...subs, other]) s.start(now);
    const [ofA, ofA2, ofB] = [...subs, other].map(recorded);

    const changed = await touch(a.nodeId, "1");
    await eventually(() => ofA.puts.length === 1 && ofA2.puts.length === 1, "both of a's");
    expect(ofA.puts).toEqual([changed]);
    expect(ofA2.puts).toEqual([changed]);
    await leader.deleteNode(a.nodeId);
    await eventually(() => ofA.deletes.length === 1, "a's deletion");
    // b's subscription heard nothing of a, and b has not changed.
    expect(ofB).toEqual({ puts: [], deletes: [] });
    for (const s of [...subs, other]) await s.cancel();
    expect(feed.size).toBe(0);
  });

  it("delivers what came before start only if it is after the revision start is given", async () => {
    const feed = new NodeRecordFeed(leader.ctx);
    const n = await leader.addNode();
    const witness = await feed.subscribe(n.nodeId);
    witness.start(await revisionNow());
    const seen = recorded(witness);
    // Subscribed before the change, started after it (as a Watch reading the record in between).
    const readBefore = await feed.subscribe(n.nodeId);
    const readAfter = await feed.subscribe(n.nodeId);
    const before = await revisionNow();
    const changed = await touch(n.nodeId, "x");
    await eventually(() => seen.puts.length === 1, "the change dispatched");
    const early = recorded(readBefore);
    const late = recorded(readAfter);
    readBefore.start(before); // its read was older than the change: it gets the change
    readAfter.start(changed); // its read saw the change already: not sent twice
    expect(early.puts).toEqual([changed]);
    expect(late.puts).toEqual([]);
    for (const s of [witness, readBefore, readAfter]) await s.cancel();
  });

  it("cancels its watch with the last subscription, and opens another for the next", async () => {
    const feed = new NodeRecordFeed(leader.ctx);
    const n = await leader.addNode();
    const first = await feed.subscribe(n.nodeId);
    first.start(await revisionNow());
    await first.cancel();
    expect(feed.size).toBe(0);
    // A change while nobody subscribes reaches nobody; the next subscription starts afresh.
    const unseen = await touch(n.nodeId, "unseen");
    const next = await feed.subscribe(n.nodeId);
    next.start(await revisionNow());
    const seen = recorded(next);
    const changed = await touch(n.nodeId, "seen");
    await eventually(() => seen.puts.length === 1, "the change after resubscribing");
    expect(seen.puts).toEqual([changed]);
    expect(seen.puts).not.toContain(unseen);
    await next.cancel();
  });
});
