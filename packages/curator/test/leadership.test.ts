/**
 * Leader election and the leadership guard, against a real etcd member:
 * one leader at a time, writes guarded by the election key, and a leader
 * whose lease expired never commits again.
 */
import { rm } from "node:fs/promises";
import { createServer, connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Etcd3, EtcdLeaseInvalidError } from "etcd3";
import { eventually } from "@metropolis/supervisor/testing";
import { ConsensusClient } from "@metropolis/consensus";
import {
  runTestMember,
  testNode,
  type TestMember,
  type TestNode,
} from "@metropolis/consensus/testing";
import { LostLeadershipError } from "../src/errors";
import {
  campaign,
  electionKeys,
  Leadership,
  type CuratorEndpoint,
  type RenewalTrouble,
} from "../src/leadership";

let node: TestNode;
let member: TestMember;
const clients: Etcd3[] = [];

beforeAll(async () => {
  node = await testNode("leadership");
  member = await runTestMember(node, { bootstrap: true });
});
afterAll(async () => {
  for (const c of clients) c.close();
  await member.harness.cleanup();
  await node.remove();
});

/** A separate etcd client, as each curator process has its own. */
function curatorKv() {
  const etcd = new Etcd3({
    hosts: `unix://${node.storage.ephemeral.consensus.fullPath}/client.sock:0`,
  });
  clients.push(etcd);
  return { etcd, kv: ConsensusClient.root(etcd).sub("curator").kv };
}

/**
 * A unix-socket proxy to etcd that, once frozen, forwards nothing either way
 * while keeping the connections open: etcd cut off without the client noticing.
 */
async function freezableProxy(target: string) {
  // etcd3 names a unix socket with a port, which grpc-js keeps in the path.
  const path = join(tmpdir(), `leadership-proxy-${process.pid}.sock:0`);
  await rm(path, { force: true });
  let frozen = false;
  const sockets = new Set<Socket>();
  const server = createServer((down) => {
    const up = connect(target);
    for (const s of [down, up]) {
      sockets.add(s);
      s.on("error", () => s.destroy());
      s.on("close", () => sockets.delete(s));
    }
    down.on("data", (d) => frozen || up.write(d));
    up.on("data", (d) => frozen || down.write(d));
    down.on("close", () => up.destroy());
    up.on("close", () => down.destroy());
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  return {
    path,
    freeze: () => (frozen = true),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const endpoint = (n: number): CuratorEndpoint => ({
  nodeId: `metropolis-${n.toString(16).padStart(32, "0")}`,
  host: "127.0.0.1",
  port: 7835 + n,
});

describe("leadership", () => {
  it("elects exactly one leader among three candidates, the first to campaign", async () => {
    const candidates = [];
    for (const n of [1, 2, 3]) candidates.push(await campaign(curatorKv().kv, endpoint(n), 5));
    const views = await Promise.all(candidates.map((c) => c.leader()));
    expect(views.map((v) => v.nodeId)).toEqual([
      endpoint(1).nodeId,
      endpoint(1).nodeId,
      endpoint(1).nodeId,
    ]);
    expect(views.map((v) => v.leading)).toEqual([true, false, false]);
    expect(views[1]).toMatchObject({ host: "127.0.0.1", port: 7836 });
    for (const c of candidates) await c.resign();
  });

  it("guards writes: the leader commits; a leader whose key is gone never does", async () => {
    const a = curatorKv();
    const b = curatorKv();
    const first = await campaign(a.kv, endpoint(11), 1);
    const second = await campaign(b.kv, endpoint(12), 5);
    const old = first.leadership();
    expect(await old.commit(old.txn().then(a.kv.put("/guarded").value("by first")))).toBe(true);

    // The first leader "crashes": its lease is no longer renewed, and its
    // key expires with it (TTL 1 s).
    first.abandon();
    const deadline = Date.now() + 5000;
    while (!(await second.leader()).leading) {
      if (Date.now() > deadline) throw new Error("no new leader within TTL + a few seconds");
      await new Promise((r) => setTimeout(r, 20));
    }
    // The old leadership object, used with a working client, is refused.
    const stale = curatorKv();
    const oldAgain = new Leadership(stale.kv, old.key, old.createRevision, old.self);
    await expect(
      oldAgain.commit(oldAgain.txn().then(stale.kv.put("/guarded").value("by old"))),
    ).rejects.toBeInstanceOf(LostLeadershipError);
    const now = second.leadership();
    expect(await now.commit(now.txn().then(b.kv.put("/guarded").value("by second")))).toBe(true);
    expect(await b.kv.get("/guarded").string()).toBe("by second");
    await second.resign();
  });

  it("a write that finds the election key gone ends the candidacy, so the curator campaigns again", async () => {
    const { kv } = curatorKv();
    const c = await campaign(kv, endpoint(6), 30);
    const l = c.leadership();
    await kv.delete().key(c.key).exec(); // the lease lives on; only the key is gone
    await expect(l.commit(l.txn().then(kv.put("/x").value("y")))).rejects.toBeInstanceOf(
      LostLeadershipError,
    );
    await expect(c.lost).resolves.toBeInstanceOf(LostLeadershipError);
    expect(await kv.get("/x").string()).toBeNull();
    await c.resign();
  });

  it("says why the candidacy ended, and reports the failed renewal before, when etcd expired the lease", async () => {
    const { etcd, kv } = curatorKv();
    const c = await campaign(kv, endpoint(7), 3);
    const troubles: RenewalTrouble[] = [];
    c.onRenewalTrouble((t) => troubles.push(t));
    // What etcd does to a lease it heard nothing from for its TTL.
    await etcd.leaseClient.leaseRevoke({ ID: c.key.slice("/leader/".length) });
    const why = await c.lost;
    expect(why).toBeInstanceOf(EtcdLeaseInvalidError);
    expect(troubles).toEqual([
      expect.objectContaining({ kind: "failed", error: expect.any(EtcdLeaseInvalidError) }),
    ]);
    expect(await electionKeys(kv)).not.toContain(c.key);
  });

  it("grants the election lease through leaseKv (a connection of its own), where etcd3 renews it", async () => {
    const main = curatorKv();
    const renewals = curatorKv();
    const grantedThere = jest.spyOn(renewals.kv, "lease");
    const grantedHere = jest.spyOn(main.kv, "lease");
    const c = await campaign(main.kv, endpoint(8), 2, { leaseKv: renewals.kv });
    expect(grantedThere).toHaveBeenCalledWith(2);
    expect(grantedHere).not.toHaveBeenCalled();
    // The key lives in the same namespace: the main client reads it.
    expect(await electionKeys(main.kv)).toContain(c.key);
    await c.resign();
  });

  it("resigns within its bound while etcd does not answer: the lease expires by itself", async () => {
    const main = curatorKv();
    const proxy = await freezableProxy(
      `${node.storage.ephemeral.consensus.fullPath}/client.sock:0`,
    );
    try {
      const renewals = new Etcd3({ hosts: `unix://${proxy.path}` });
      clients.push(renewals);
      const leaseKv = ConsensusClient.root(renewals).sub("curator").kv;
      const c = await campaign(main.kv, endpoint(9), 2, { leaseKv });
      proxy.freeze();
      // Unbounded, the revocation waits on a connection that never answers:
      // the test would time out here.
      await c.resign(100);
      // Not revoked (etcd never heard of it): the key goes with the lease's TTL.
      expect(await electionKeys(main.kv)).toContain(c.key);
      await eventually(
        async () => !(await electionKeys(main.kv)).includes(c.key),
        "the election key expired with its lease",
        { timeoutMs: 10_000 },
      );
    } finally {
      await proxy.close();
    }
  });

  it("distinguishes a failed comparison of the caller's own from lost leadership", async () => {
    const { kv } = curatorKv();
    const c = await campaign(kv, endpoint(4), 5);
    const l = c.leadership();
    await kv.put("/exists").value("x");
    expect(
      await l.commit(l.txn().and("/exists", "Create", "==", 0).then(kv.put("/exists").value("y"))),
    ).toBe(false);
    expect(await kv.get("/exists").string()).toBe("x");
    await c.resign();
  });

  it("removes its own stale election key from an earlier life before campaigning", async () => {
    const { kv } = curatorKv();
    const earlier = await campaign(kv, endpoint(5), 30);
    const keysBefore = await electionKeys(kv);
    expect(keysBefore).toContain(earlier.key);
    // A restart: same node campaigns again without having resigned.
    const again = await campaign(kv, endpoint(5), 30);
    const keysAfter = await electionKeys(kv);
    expect(keysAfter).not.toContain(earlier.key);
    expect(keysAfter).toContain(again.key);
    await again.resign();
    await earlier.resign();
  });

  it("a follower follows the election without missing a change, and returns once it leads", async () => {
    const first = await campaign(curatorKv().kv, endpoint(6), 30);
    const second = await campaign(curatorKv().kv, endpoint(7), 30);
    const third = await campaign(curatorKv().kv, endpoint(8), 30);
    const seen: string[] = [];
    const abort = new AbortController();
    let leads = false;
    const following = third
      .followUntilLeading(abort.signal, (l) => seen.push(l.nodeId))
      .then(() => (leads = true));
    await eventually(() => seen.length === 1, "the first leader reported");
    expect(seen).toEqual([endpoint(6).nodeId]);

    // Two changes back to back: the second candidate leads, then leaves too.
    await first.resign();
    await eventually(() => seen.includes(endpoint(7).nodeId), "the second leader reported");
    expect(leads).toBe(false);
    await second.resign();
    await following;
    expect(leads).toBe(true);
    expect((await third.leader()).leading).toBe(true);
    await third.resign();
  });

  it("stops following when aborted", async () => {
    const leader = await campaign(curatorKv().kv, endpoint(9), 30);
    const follower = await campaign(curatorKv().kv, endpoint(10), 30);
    const abort = new AbortController();
    const following = follower.followUntilLeading(abort.signal, () => undefined);
    abort.abort(new Error("left the follower state"));
    await expect(following).rejects.toThrow("left the follower state");
    await follower.resign();
    await leader.resign();
  });
});
