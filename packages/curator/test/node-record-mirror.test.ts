/**
 * The leader's copy of the node records (node-record-mirror.ts) against a
 * real one-member etcd (startLeader of @metropolis/curator/testing): it
 * serves listings without reading etcd, follows every change, is never
 * older than the leader's last write (it waits for the watch, and reads
 * etcd when the watch does not get there in time), and reports a corrupt
 * record as etcd's reads do.
 */
import { status } from "@grpc/grpc-js";
import type { IKeyValue } from "etcd3";
import winston from "winston";
import { priv } from "@metropolis/proto";
import { startLeader, type LeaderFixture } from "@metropolis/curator/testing";
import { eventually } from "@metropolis/supervisor/testing";
import { CuratorError } from "../src/errors";
import { nodeKey } from "../src/keys";
import { catchUpMs, NodeRecordMirror } from "../src/node-record-mirror";
import { nodeIdOf } from "../src/node-watch-streams";

let leader: LeaderFixture;
const logger = winston.createLogger({ silent: true });

beforeAll(async () => {
  leader = await startLeader();
}, 30_000);

afterAll(async () => {
  await leader?.stop();
});

/** A mirror of the fixture's records whose "last write of the leader" the test sets. */
function mirrorWithWrites(lastWriteRevision = 0n) {
  const leadership = { lastWriteRevision };
  const mirror = new NodeRecordMirror(leader.ctx.kv, leadership, logger);
  return { mirror, leadership };
}

/** The etcd revision now. */
async function revisionNow(): Promise<bigint> {
  return BigInt((await leader.ctx.kv.get(nodeKey("none")).exec()).header.revision);
}

describe("NodeRecordMirror", () => {
  it("lists every record in key order from one read, and follows changes without reading again", async () => {
    const a = await leader.addNode();
    const { mirror } = mirrorWithWrites();
    const reads = jest.spyOn(leader.ctx.kv, "getAll");
    try {
      const first = await mirror.list();
      expect(first.map((n) => n.id)).toEqual(
        [...first.map((n) => n.id)].sort((x, y) => (x < y ? -1 : 1)),
      );
      expect(first.map((n) => n.id)).toContain(a.nodeId);

      const b = await leader.addNode();
      await leader.updateNode(a.nodeId, (n) => ({ ...n, labels: new Map([["seen", "yes"]]) }));
      await eventually(async () => (await mirror.find(b.nodeId)) !== undefined, "b in the copy");
      await eventually(
        async () => (await mirror.find(a.nodeId))?.node.labels.get("seen") === "yes",
        "a's label in the copy",
      );
      await leader.deleteNode(b.nodeId);
      await eventually(async () => (await mirror.find(b.nodeId)) === undefined, "b gone");
      // One read of every record, at the start: the rest came from the watch.
      expect(reads).toHaveBeenCalledTimes(1);
    } finally {
      reads.mockRestore();
      await mirror.close();
    }
  });

  it("decodes its first read in slices, letting the event loop run between them", async () => {
    for (let i = 0; i < 3; i++) await leader.addNode();
    const mirror = new NodeRecordMirror(leader.ctx.kv, { lastWriteRevision: 0n }, logger, {
      decodeSliceMs: 0,
    });
    // Counts the turns of the event loop (its check phase), and notes the
    // turn in which each record is decoded.
    let turn = 0;
    let ticking = true;
    const tick = () => {
      turn++;
      if (ticking) setImmediate(tick);
    };
    const decodedIn: number[] = [];
    const original = priv.Node.decode;
    const decode = jest.spyOn(priv.Node, "decode").mockImplementation((input, length) => {
      decodedIn.push(turn);
      return original(input, length);
    });
    try {
      setImmediate(tick);
      const listed = await mirror.list();
      expect(listed.length).toBeGreaterThanOrEqual(3);
      expect(decodedIn.length).toBe(listed.length);
      // One turn of the loop per record: with no slicing, all in one turn.
      expect(new Set(decodedIn).size).toBe(decodedIn.length);
    } finally {
      ticking = false;
      decode.mockRestore();
      await mirror.close();
    }
  });

  it("waits for the leader's last write, and reads etcd when its watch does not get there in time", async () => {
    const { mirror, leadership } = mirrorWithWrites();
    mirror.prime();
    await mirror.list();
    const reads = jest.spyOn(leader.ctx.kv, "getAll");
    try {
      // A write the copy will see: the read waits for it, then answers from the copy.
      const c = await leader.addNode();
      leadership.lastWriteRevision = await revisionNow();
      expect((await mirror.list()).map((n) => n.id)).toContain(c.nodeId);
      expect(reads).not.toHaveBeenCalled();

      // A revision no write of the namespace reaches: the copy cannot vouch
      // for it, so after catchUpMs the read goes to etcd (and is right).
      leadership.lastWriteRevision = (await revisionNow()) + 1000n;
      const started = Date.now();
      expect((await mirror.list()).map((n) => n.id)).toContain(c.nodeId);
      expect(Date.now() - started).toBeGreaterThanOrEqual(catchUpMs - 50);
      expect(reads).toHaveBeenCalledTimes(1);
    } finally {
      reads.mockRestore();
      await mirror.close();
    }
  });

  it("records the revision of each write the leadership commits", async () => {
    const before = leader.ctx.leadership.lastWriteRevision;
    const d = await leader.addNode();
    const written = BigInt((await leader.ctx.kv.get(nodeKey(d.nodeId)).exec()).kvs[0].mod_revision);
    expect(leader.ctx.leadership.lastWriteRevision).toBe(written);
    expect(written).toBeGreaterThan(before);
    // And the leader's own copy holds it at once.
    expect(await leader.ctx.nodes.find(d.nodeId)).toBeDefined();
  });

  it("fails a read of a corrupt record with DATA_LOSS, as a read from etcd does", async () => {
    const e = await leader.addNode();
    const { mirror, leadership } = mirrorWithWrites();
    try {
      await mirror.list();
      const id = "metropolis-0123456789abcdef0123456789abcdef";
      await leader.ctx.leadership.commit(
        leader.ctx.leadership
          .txn()
          .then(leader.ctx.kv.put(nodeKey(id)).value(Buffer.from([0xff, 0xff, 0xff]))),
      );
      leadership.lastWriteRevision = leader.ctx.leadership.lastWriteRevision;
      const failure = await mirror.list().then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(failure).toBeInstanceOf(CuratorError);
      expect(failure).toMatchObject({ code: status.DATA_LOSS });
      await expect(mirror.find(id)).rejects.toThrow(/is corrupt/);
      expect(await mirror.find(e.nodeId)).toBeDefined();
      // Gone again, and the listing works again.
      await leader.ctx.leadership.commit(
        leader.ctx.leadership.txn().then(leader.ctx.kv.delete().key(nodeKey(id))),
      );
      leadership.lastWriteRevision = leader.ctx.leadership.lastWriteRevision;
      expect((await mirror.list()).map((n) => n.id)).toContain(e.nodeId);
    } finally {
      await mirror.close();
    }
  });

  it("follows: the records at one revision, then every later change once, until it is given up", async () => {
    const { mirror } = mirrorWithWrites();
    const a = await leader.addNode();
    const followed = await mirror.follow();
    if (!followed) throw new Error("the copy could not be read");
    const { changes } = followed;
    const seen: { kind: string; id: string; revision: bigint }[] = [];
    const record =
      (kind: string) =>
      (entry: IKeyValue): void => {
        seen.push({ kind, id: nodeIdOf(entry), revision: BigInt(entry.mod_revision) });
      };
    changes.on("put", record("put"));
    changes.on("delete", record("delete"));
    const failed = new Promise<Error>((resolve) => changes.once("error", resolve));
    try {
      expect(followed.records.map((r) => r.id)).toContain(a.nodeId);
      // Every record of the snapshot is at or before its revision.
      for (const r of followed.records)
        expect(BigInt(r.modRevision)).toBeLessThanOrEqual(followed.revision);

      const b = await leader.addNode();
      await leader.updateNode(a.nodeId, (n) => ({ ...n, labels: new Map([["seen", "yes"]]) }));
      await leader.deleteNode(b.nodeId);
      await eventually(() => seen.length === 3, "three changes");
      expect(seen.map((c) => [c.kind, c.id])).toEqual([
        ["put", b.nodeId],
        ["put", a.nodeId],
        ["delete", b.nodeId],
      ]);
      for (const c of seen) expect(c.revision).toBeGreaterThan(followed.revision);
      expect(seen[0].revision < seen[1].revision && seen[1].revision < seen[2].revision).toBe(true);
    } finally {
      await mirror.close();
    }
    // Closing (the leadership ended) gives the followers up: their streams end.
    expect((await failed).message).toMatch(/copy of the node records was given up/);
    expect(changes.failure).toBeDefined();
    // A closed copy is nobody's to follow: the caller reads etcd instead.
    expect(await mirror.follow()).toBeUndefined();
  });

  it("stops the events of a cancelled follower", async () => {
    const { mirror } = mirrorWithWrites();
    try {
      const followed = await mirror.follow();
      if (!followed) throw new Error("the copy could not be read");
      const puts: string[] = [];
      followed.changes.on("put", (entry: IKeyValue) => puts.push(nodeIdOf(entry)));
      await followed.changes.cancel();
      const later = await leader.addNode();
      // The copy saw it, and would have told its followers in the same step.
      await eventually(
        async () => (await mirror.find(later.nodeId)) !== undefined,
        "the new node in the copy",
      );
      expect(puts).toEqual([]);
    } finally {
      await mirror.close();
    }
  });

  it("reads etcd once closed", async () => {
    const { mirror } = mirrorWithWrites();
    await mirror.list();
    await mirror.close();
    const f = await leader.addNode();
    expect(await mirror.find(f.nodeId)).toBeDefined();
  });
});
