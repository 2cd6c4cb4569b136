/**
 * openWatch against a real etcd: it resolves once etcd created the watch
 * (a change made after it resolves is seen; so is etcd cancelling it),
 * and — unlike etcd3's create(), which waits for ever while etcd is
 * unreachable — gives up with its signal.
 */
import { once } from "node:events";
import type { Etcd3, IKeyValue } from "etcd3";
import { openWatch } from "@metropolis/consensus";
import { startEtcdCluster, type EtcdCluster } from "@metropolis/consensus/testing";

let cluster: EtcdCluster;
let client: Etcd3;

beforeAll(async () => {
  cluster = await startEtcdCluster(1);
  client = cluster.client();
});
afterAll(() => cluster.stop());

it("resolves once etcd created the watch: a change made afterwards is seen", async () => {
  const watcher = await openWatch(client.watch().key("opened"), AbortSignal.timeout(20_000));
  try {
    const seen = once(watcher, "put");
    await client.put("opened").value("1");
    const [kv] = (await seen) as [IKeyValue];
    expect(kv.value.toString()).toBe("1");
  } finally {
    await watcher.cancel();
  }
});

it("resolves at creation: etcd cancelling the watch afterwards (compacted) reaches the caller's listener", async () => {
  await client.put("compacted").value("1");
  const { header } = await client.put("compacted").value("2");
  await client.kv.compact({ revision: header.revision, physical: true });
  // etcd creates the watch, then cancels it: its start revision is compacted.
  const watcher = await openWatch(
    client.watch().key("compacted").startRevision("1"),
    AbortSignal.timeout(20_000),
  );
  const [error] = (await once(watcher, "error")) as [Error];
  expect(error.message).toMatch(/Watcher canceled/);
});

it("rejects with an aborted signal's reason at once", async () => {
  const stop = new AbortController();
  stop.abort(new Error("stopped before"));
  await expect(openWatch(client.watch().key("never"), stop.signal)).rejects.toThrow(
    "stopped before",
  );
});

it("gives up with its signal while etcd is unreachable", async () => {
  const [member] = cluster.members;
  await member.stop();
  try {
    const stop = new AbortController();
    const opening = openWatch(client.watch().key("unreachable"), stop.signal);
    // etcd3's create() would stay pending for as long as etcd is down.
    stop.abort(new Error("stopping"));
    await expect(opening).rejects.toThrow("stopping");
  } finally {
    await member.restart();
  }
});
