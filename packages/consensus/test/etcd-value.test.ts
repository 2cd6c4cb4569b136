import http from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import {
  BacklogDone,
  ConcurrentGetError,
  DecoderError,
  WatcherClosedError,
  type EtcdWatcher,
} from "@metropolis/event";
import type { Etcd3, IRangeResponse } from "etcd3";
import { etcdValue, type EtcdReader } from "../src/etcd-value";
import { startEtcdCluster, type EtcdCluster } from "@metropolis/consensus/testing";
import { eventually } from "@metropolis/supervisor/testing";

/** What the test decoder makes of a key's bytes. */
interface Entry {
  key: string;
  value: string | null;
}

const decode = (key: string, bytes: Buffer | null): Entry => ({
  key,
  value: bytes === null ? null : bytes.toString(),
});

/** How long a get() waits to show that nothing is pending: a deadline, never a pause of the test. */
const NOTHING_PENDING_MS = 300;
/** Deadline for an update to arrive across a member failure (etcd3's circuit breaker holds a dead host for 5 s). */
const FAILOVER_MS = 20_000;

let cluster: EtcdCluster;
let client: Etcd3;
let prefixes = 0;

/** A key prefix of its own for each test, so that tests sharing the cluster cannot see each other's keys. */
function freshPrefix(): string {
  return `t${++prefixes}/`;
}

/** The etcd range of every key starting with `prefix` (prefixes here end in "/", whose successor is "0"). */
function prefixRange(prefix: string): { key: string; rangeEnd: string } {
  return { key: prefix, rangeEnd: `${prefix.slice(0, -1)}0` };
}

/** Expects the watcher to have nothing to deliver within NOTHING_PENDING_MS. */
async function expectNothingPending(w: EtcdWatcher<Entry>): Promise<void> {
  await expect(w.get({ signal: AbortSignal.timeout(NOTHING_PENDING_MS) })).rejects.toMatchObject({
    name: "TimeoutError",
  });
}

/** The next `n` updates of a range watcher, by key (a key twice would be a bug: updates are collapsed per key). */
async function nextUpdates(
  w: EtcdWatcher<Entry>,
  n: number,
  timeoutMs = 5000,
): Promise<Record<string, string | null>> {
  const signal = AbortSignal.timeout(timeoutMs);
  const got: Record<string, string | null> = {};
  for (let i = 0; i < n; i++) {
    const e = await w.get({ signal });
    expect(got).not.toHaveProperty([e.key]);
    got[e.key] = e.value;
  }
  return got;
}

/**
 * Changes `key` from `from` (null: absent) to `to` through a leader election,
 * retrying until the deadline.
 *
 * A compare-and-swap rather than a put, because a write whose call failed may
 * still be applied, and late: a follower forwards a put to the leader, and if
 * that leader is paused the proposal waits in its socket while the others
 * elect a new leader and take later writes; once the old leader resumes and
 * steps down, it forwards the stranded proposal to the new one, which applies
 * it after those writes. A plain put retried after its deadline would thus
 * write its value a second time, out of order (seen as the key going back from
 * "5" to "1" in the partition test below). Conditional on the value it
 * replaces, a late copy finds the key moved on and changes nothing, so each
 * value is written exactly once, in order.
 */
async function putEventually(
  kv: Etcd3,
  key: string,
  from: string | null,
  to: string,
): Promise<void> {
  const deadline = Date.now() + FAILOVER_MS;
  let current: string | null;
  for (;;) {
    try {
      const unchanged =
        from === null ? kv.if(key, "Version", "==", 0) : kv.if(key, "Value", "==", from);
      const res = await unchanged
        .then(kv.put(key).value(to))
        .else(kv.get(key))
        .options({ deadline: Date.now() + 1000 })
        .commit();
      if (res.succeeded) return;
      current = res.responses[0].response_range.kvs[0]?.value.toString() ?? null;
      break;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(20);
    }
  }
  // An attempt that seemed to fail was applied after all.
  if (current !== to) throw new Error(`${key} is ${current}, not ${from} or ${to}`);
}

/** etcd's count of open watches, summed over the members (its /metrics gauge). */
async function openEtcdWatches(): Promise<number> {
  const counts = await Promise.all(
    cluster.endpoints.map(
      (url) =>
        new Promise<number>((resolve, reject) => {
          http
            .get(`${url}/metrics`, { agent: false }, (res) => {
              let body = "";
              res.setEncoding("utf8");
              res.on("data", (chunk: string) => (body += chunk));
              res.on("end", () => {
                const m = /^etcd_debugging_mvcc_watcher_total (\d+)$/m.exec(body);
                if (m === null) reject(new Error(`no watcher gauge in ${url}/metrics`));
                else resolve(Number(m[1]));
              });
            })
            .on("error", reject);
        }),
    ),
  );
  return counts.reduce((a, b) => a + b, 0);
}

/**
 * The open-watch count once it stopped moving: watches that earlier tests
 * closed are cancelled by etcd asynchronously, and would otherwise be
 * counted here and gone a moment later.
 */
async function settledEtcdWatches(): Promise<number> {
  const deadline = Date.now() + 5000;
  let last = await openEtcdWatches();
  let same = 0;
  while (same < 5 && Date.now() < deadline) {
    await sleep(20);
    const now = await openEtcdWatches();
    same = now === last ? same + 1 : 0;
    last = now;
  }
  return last;
}

/**
 * A reader over `client` whose first Get runs `meanwhile` before handing back
 * its answer: what `meanwhile` writes happens after the Get's revision but
 * before the watch starts. Counts the Gets.
 */
function holdFirstRead(meanwhile: () => Promise<void>): EtcdReader & { reads: number } {
  const reader = {
    reads: 0,
    get: (key: string | Buffer) => hold(client.get(key)),
    getAll: () => hold(client.getAll()),
    watch: () => client.watch(),
  };
  function hold<B extends { exec(): Promise<IRangeResponse> }>(builder: B): B {
    const exec = builder.exec.bind(builder);
    builder.exec = async () => {
      const res = await exec();
      if (++reader.reads === 1) await meanwhile();
      return res;
    };
    return builder;
  }
  return reader;
}

beforeAll(async () => {
  cluster = await startEtcdCluster(3);
  client = cluster.client();
});

afterAll(async () => {
  await cluster?.stop();
});

describe("etcdValue of a single key", () => {
  it("delivers the current value, then each change; a rewrite of the same bytes is none", async () => {
    // Through a namespace, as the consensus client hands it out: keys are relative.
    const ns = client.namespace("namespaced:curator/");
    const key = `${freshPrefix()}node`;
    await ns.put(key).value("v1");
    const w = etcdValue(ns, { key, decoder: decode }).watch();
    try {
      await expect(w.get()).resolves.toEqual({ key, value: "v1" });

      const next = w.get();
      await ns.put(key).value("v2");
      await expect(next).resolves.toEqual({ key, value: "v2" });

      await ns.put(key).value("v2");
      await expectNothingPending(w);
      await ns.put(key).value("v3");
      await expect(w.get()).resolves.toEqual({ key, value: "v3" });

      await ns.delete().key(key);
      await expect(w.get()).resolves.toEqual({ key, value: null });
      expect(await client.get(`namespaced:curator/${key}`)).toBeNull();
    } finally {
      w.close();
    }
  });

  it("delivers a missing key as decoder(key, null), then waits for a put", async () => {
    const key = `${freshPrefix()}missing`;
    const decoder = jest.fn(decode);
    const w = etcdValue(client, { key, decoder }).watch();
    try {
      await expect(w.get()).resolves.toEqual({ key, value: null });
      expect(decoder).toHaveBeenCalledWith(key, null);
      await expectNothingPending(w);
      await client.put(key).value("here");
      await expect(w.get()).resolves.toEqual({ key, value: "here" });
    } finally {
      w.close();
    }
  });

  it("rejects with a DecoderError naming the key, and later values still arrive", async () => {
    const key = `${freshPrefix()}bad`;
    await client.put(key).value("garbage");
    const w = etcdValue(client, {
      key,
      decoder: (k, bytes) => {
        if (bytes?.toString() === "garbage") throw new SyntaxError("not a node");
        return decode(k, bytes);
      },
    }).watch();
    try {
      const err: unknown = await w.get().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DecoderError);
      expect(err).toMatchObject({ key, message: expect.stringContaining("not a node") });
      expect((err as DecoderError).cause).toBeInstanceOf(SyntaxError);

      await client.put(key).value("good");
      await expect(w.get()).resolves.toEqual({ key, value: "good" });
    } finally {
      w.close();
    }
  });

  it("skips values a filter rejects", async () => {
    const key = `${freshPrefix()}filtered`;
    await client.put(key).value("skip-1");
    const w = etcdValue(client, { key, decoder: decode }).watch();
    try {
      const p = w.get({ filter: (e) => !e.value?.startsWith("skip") });
      await client.put(key).value("skip-2");
      await client.put(key).value("keep");
      await expect(p).resolves.toEqual({ key, value: "keep" });
    } finally {
      w.close();
    }
  });
});

describe("etcdValue of a key range", () => {
  it("delivers each existing key once, then changes per key, deletes as null, no rewrites", async () => {
    const prefix = freshPrefix();
    await client.put(`${prefix}a`).value("a1");
    await client.put(`${prefix}b`).value("b1");
    await client.put(`${prefix}c`).value("c1");
    // Neighbours outside the range must not show up.
    await client.put(`${prefix.slice(0, -1)}`).value("outside");
    await client.put(`${prefix.slice(0, -1)}0`).value("outside");
    const w = etcdValue(client, { ...prefixRange(prefix), decoder: decode }).watch();
    try {
      expect(await nextUpdates(w, 3)).toEqual({
        [`${prefix}a`]: "a1",
        [`${prefix}b`]: "b1",
        [`${prefix}c`]: "c1",
      });
      await expectNothingPending(w);

      await client.put(`${prefix}a`).value("a2");
      await expect(w.get()).resolves.toEqual({ key: `${prefix}a`, value: "a2" });

      await client.delete().key(`${prefix}c`);
      await expect(w.get()).resolves.toEqual({ key: `${prefix}c`, value: null });

      // A rewrite of the same bytes is dropped. The put to d comes after it in
      // the same etcd watch, so once d arrives the rewrite has been seen.
      await client.put(`${prefix}a`).value("a2");
      await client.put(`${prefix}d`).value("d1");
      await expect(w.get()).resolves.toEqual({ key: `${prefix}d`, value: "d1" });
      await expectNothingPending(w);
    } finally {
      w.close();
    }
  });

  it("backlogOnly returns each existing key once, then BacklogDone; plain get() then follows updates", async () => {
    const prefix = freshPrefix();
    await client.put(`${prefix}x`).value("x1");
    await client.put(`${prefix}y`).value("y1");
    const w = etcdValue(client, { ...prefixRange(prefix), decoder: decode }).watch();
    try {
      const backlog: Record<string, string | null> = {};
      for (;;) {
        let e: Entry;
        try {
          e = await w.get({ backlogOnly: true });
        } catch (err) {
          expect(err).toBeInstanceOf(BacklogDone);
          break;
        }
        expect(backlog).not.toHaveProperty([e.key]);
        backlog[e.key] = e.value;
      }
      expect(backlog).toEqual({ [`${prefix}x`]: "x1", [`${prefix}y`]: "y1" });
      await expect(w.get({ backlogOnly: true })).rejects.toBeInstanceOf(BacklogDone);

      await client.put(`${prefix}z`).value("z1");
      await client.put(`${prefix}x`).value("x2");
      expect(await nextUpdates(w, 2)).toEqual({ [`${prefix}z`]: "z1", [`${prefix}x`]: "x2" });
    } finally {
      w.close();
    }
  });

  it("backlogOnly of an empty range is done at once", async () => {
    const w = etcdValue(client, { ...prefixRange(freshPrefix()), decoder: decode }).watch();
    try {
      await expect(w.get({ backlogOnly: true })).rejects.toBeInstanceOf(BacklogDone);
    } finally {
      w.close();
    }
  });
});

describe("etcdValue collapsing a backlog", () => {
  // A live watch receives each change on its own, so whether a get() sees an
  // intermediate value depends on timing. Changes made between the first Get
  // and the start of the watch reach the watcher as one batch instead, which
  // makes what is collapsed deterministic.
  it("of a single key returns only the newest value", async () => {
    const key = `${freshPrefix()}batched`;
    await client.put(key).value("v0");
    const reader = holdFirstRead(async () => {
      for (const v of ["v1", "v2", "v3"]) await client.put(key).value(v);
    });
    const w = etcdValue(reader, { key, decoder: decode }).watch();
    try {
      await expect(w.get()).resolves.toEqual({ key, value: "v0" });
      await expect(w.get()).resolves.toEqual({ key, value: "v3" });
      await expectNothingPending(w);
    } finally {
      w.close();
    }
  });

  it("of a range returns the newest value of each changed key, and no net-unchanged key", async () => {
    const prefix = freshPrefix();
    const k = (name: string) => `${prefix}${name}`;
    await client.put(k("a")).value("a0");
    const reader = holdFirstRead(async () => {
      await client.put(k("a")).value("a1");
      await client.put(k("a")).value("a0"); // back to what was delivered
      await client.put(k("b")).value("b1");
      await client.delete().key(k("b")); // created and deleted: never there for the reader
      await client.put(k("c")).value("c1");
      await client.put(k("c")).value("c2");
      await client.put(k("d")).value("d1");
      await client.put(k("c")).value("c3");
    });
    const w = etcdValue(reader, { ...prefixRange(prefix), decoder: decode }).watch();
    try {
      await expect(w.get()).resolves.toEqual({ key: k("a"), value: "a0" });
      expect(await nextUpdates(w, 2)).toEqual({ [k("c")]: "c3", [k("d")]: "d1" });
      await expectNothingPending(w);
    } finally {
      w.close();
    }
  });
});

describe("etcdValue re-sync", () => {
  it("is not disturbed by a compaction of history it has seen", async () => {
    const key = `${freshPrefix()}busy`;
    await client.put(key).value("0");
    const w = etcdValue(client, { key, decoder: decode }).watch();
    try {
      await expect(w.get()).resolves.toEqual({ key, value: "0" });
      let revision = "";
      for (let i = 1; i <= 100; i++) {
        revision = (await client.put(key).value(String(i))).header.revision;
      }
      await client.kv.compact({ revision, physical: true });
      // Live updates: intermediate values may be seen, but in order, up to the newest.
      const signal = AbortSignal.timeout(5000);
      let last = 0;
      while (last < 100) {
        const { value } = await w.get({ signal });
        expect(Number(value)).toBeGreaterThan(last);
        last = Number(value);
      }
      await expectNothingPending(w);
    } finally {
      w.close();
    }
  });

  it("reads the state again when the revision it watches from is compacted", async () => {
    const key = `${freshPrefix()}stale`;
    await client.put(key).value("v0");
    // The key moves on and the history is compacted between the first Get
    // and the start of the watch, so etcd refuses to watch from that Get's
    // revision + 1: only a second Get can find the newest value.
    const reader = holdFirstRead(async () => {
      let revision = "";
      for (let i = 1; i <= 20; i++) {
        revision = (await client.put(key).value(`v${i}`)).header.revision;
      }
      await client.kv.compact({ revision, physical: true });
    });
    const w = etcdValue(reader, { key, decoder: decode }).watch();
    try {
      await expect(w.get()).resolves.toEqual({ key, value: "v0" });
      await expect(w.get({ signal: AbortSignal.timeout(5000) })).resolves.toEqual({
        key,
        value: "v20",
      });
      expect(reader.reads).toBe(2);
      await expectNothingPending(w);
    } finally {
      w.close();
    }
  });
});

describe("etcdValue under member failures", () => {
  it("keeps delivering while each member in turn is killed and restarted", async () => {
    const key = `${freshPrefix()}ha`;
    const watching = cluster.client();
    const w = etcdValue(watching, { key, decoder: decode }).watch();
    try {
      await expect(w.get()).resolves.toEqual({ key, value: null });
      let last: string | null = null;
      // Killing every member once kills, at some point, the one the watch stream is on.
      for (const member of cluster.members) {
        const down = `${member.name}-down`;
        const up = `${member.name}-up`;
        // A writer of its own per round: etcd3's circuit breakers, still open
        // for members killed in earlier rounds, would only make it wait.
        const writer = cluster.client();
        await member.kill();
        await putEventually(writer, key, last, down);
        await expect(w.get({ signal: AbortSignal.timeout(FAILOVER_MS) })).resolves.toEqual({
          key,
          value: down,
        });
        await member.restart();
        await putEventually(writer, key, down, up);
        await expect(w.get({ signal: AbortSignal.timeout(FAILOVER_MS) })).resolves.toEqual({
          key,
          value: up,
        });
        last = up;
      }
    } finally {
      w.close();
    }
  }, 60_000);

  it("catches up, latest wins, once the only member its client knows is back", async () => {
    const prefix = freshPrefix();
    const member = cluster.members[1];
    const others = cluster.client({
      hosts: cluster.members.filter((m) => m !== member).map((m) => m.clientUrl),
    });
    await client.put(`${prefix}a`).value("a1");
    await client.put(`${prefix}b`).value("b1");
    const w = etcdValue(cluster.client({ hosts: member.clientUrl }), {
      ...prefixRange(prefix),
      decoder: decode,
    }).watch();
    try {
      expect(await nextUpdates(w, 2)).toEqual({ [`${prefix}a`]: "a1", [`${prefix}b`]: "b1" });
      await member.kill();
      await putEventually(others, `${prefix}a`, "a1", "a2");
      await putEventually(others, `${prefix}a`, "a2", "a3");
      await putEventually(others, `${prefix}c`, null, "c1");
      await others.delete().key(`${prefix}b`);
      await expectNothingPending(w);
      await member.restart();
      expect(await nextUpdates(w, 3, FAILOVER_MS)).toEqual({
        [`${prefix}a`]: "a3",
        [`${prefix}b`]: null,
        [`${prefix}c`]: "c1",
      });
      await expectNothingPending(w);
    } finally {
      w.close();
    }
  }, 60_000);

  it("waits out a partition of the only member its client knows, then delivers the newest value", async () => {
    const key = `${freshPrefix()}partitioned`;
    const member = cluster.members[2];
    const others = cluster.client({
      hosts: cluster.members.filter((m) => m !== member).map((m) => m.clientUrl),
    });
    await client.put(key).value("0");
    const w = etcdValue(cluster.client({ hosts: member.clientUrl }), {
      key,
      decoder: decode,
    }).watch();
    try {
      await expect(w.get()).resolves.toEqual({ key, value: "0" });
      // When the paused member is the leader, the first write stalls until the
      // others elect a new one and is retried; the stalled attempt reaches the
      // new leader only once the member resumes, after "5". putEventually's
      // compare-and-swap is what makes that late copy a no-op and keeps "5"
      // the newest value: with plain puts the key would go back to "1".
      member.pause();
      try {
        for (let i = 1; i <= 5; i++) await putEventually(others, key, String(i - 1), String(i));
        await expectNothingPending(w);
      } finally {
        member.resume();
      }
      // The member replays what it missed to the watch as it catches up, so
      // intermediate values may be seen, in order, up to the newest.
      const signal = AbortSignal.timeout(FAILOVER_MS);
      let last = 0;
      while (last < 5) {
        const { value } = await w.get({ signal });
        expect(Number(value)).toBeGreaterThan(last);
        last = Number(value);
      }
      await expectNothingPending(w);
    } finally {
      w.close();
    }
  }, 60_000);
});

describe("etcdValue watchers", () => {
  it("reject an aborted get() with the reason and stay usable", async () => {
    const key = `${freshPrefix()}abort`;
    await client.put(key).value("v1");
    const w = etcdValue(client, { key, decoder: decode }).watch();
    try {
      await w.get();
      const ac = new AbortController();
      const p = w.get({ signal: ac.signal });
      const reason = new Error("caller gave up");
      ac.abort(reason);
      await expect(p).rejects.toBe(reason);
      await expect(w.get({ signal: ac.signal })).rejects.toBe(reason);

      await client.put(key).value("v2");
      await expect(w.get()).resolves.toEqual({ key, value: "v2" });
    } finally {
      w.close();
    }
  });

  it("reject a concurrent get() and, on close(), the pending one", async () => {
    const key = `${freshPrefix()}close`;
    const w = etcdValue(client, { key, decoder: decode }).watch();
    await w.get();
    const pending = w.get();
    await expect(w.get()).rejects.toBeInstanceOf(ConcurrentGetError);
    w.close();
    await expect(pending).rejects.toBeInstanceOf(WatcherClosedError);
    await expect(w.get()).rejects.toBeInstanceOf(WatcherClosedError);
    w.close();
  });

  it("cancel their etcd watch on close()", async () => {
    const key = `${freshPrefix()}cancel`;
    const own = cluster.client();
    const before = await settledEtcdWatches();
    const w = etcdValue(own, { key, decoder: decode }).watch();
    await w.get();
    await eventually(async () => (await openEtcdWatches()) === before + 1, "the watch open", {
      timeoutMs: 5000,
      intervalMs: 20,
    });
    const pending = w.get();
    w.close();
    await expect(pending).rejects.toBeInstanceOf(WatcherClosedError);
    await eventually(async () => (await openEtcdWatches()) === before, "the watch cancelled", {
      timeoutMs: 5000,
      intervalMs: 20,
    });
  });

  it("do not touch etcd before their first get()", () => {
    const untouchable: EtcdReader = {
      get: () => {
        throw new Error("unexpected etcd call");
      },
      getAll: () => {
        throw new Error("unexpected etcd call");
      },
      watch: () => {
        throw new Error("unexpected etcd call");
      },
    };
    const value = etcdValue(untouchable, { key: "k", decoder: decode });
    value.watch();
    value.watch().close();
  });

  it("close when a for-await loop over them ends", async () => {
    const prefix = freshPrefix();
    await client.put(`${prefix}1`).value("one");
    await client.put(`${prefix}2`).value("two");
    const w = etcdValue(client, { ...prefixRange(prefix), decoder: decode }).watch();
    const seen: string[] = [];
    for await (const e of w) {
      seen.push(e.key);
      if (seen.length === 2) break;
    }
    expect(seen.sort()).toEqual([`${prefix}1`, `${prefix}2`]);
    await expect(w.get()).rejects.toBeInstanceOf(WatcherClosedError);
  });

  it("refuse options etcd cannot serve", () => {
    expect(() => etcdValue(client, { key: "", decoder: decode })).toThrow(RangeError);
    expect(() => etcdValue(client, { key: "a", rangeEnd: "", decoder: decode })).toThrow(
      RangeError,
    );
  });
});
