/**
 * A curator stream's sleep (what the heartbeat worker waits on between
 * beats, for as long as its stream lives) against a real curator: it ends
 * early when the stream breaks or the caller stops, and leaves nothing on
 * the stream once over.
 */
import type { curator } from "@metropolis/proto";
import { liveHeapBytes } from "@metropolis/supervisor/testing";
import { openStream, type CuratorStream } from "../src/curator-calls";
import { CuratorStreamError } from "../src/errors";
import { startTestCluster, type TestCluster } from "./curator-fixture";

type HeartbeatCall = ReturnType<curator.CuratorClient["heartbeat"]>;

let cluster: TestCluster;
beforeAll(async () => {
  cluster = await startTestCluster();
});
afterAll(() => cluster?.stop());

/** A live Heartbeat stream of a new node (its first beat answered). */
async function heartbeatStream(): Promise<CuratorStream<curator.HeartbeatResponse, HeartbeatCall>> {
  const node = await cluster.addNode();
  const { stream } = await openStream<curator.HeartbeatResponse, HeartbeatCall>(
    cluster.connect(node).connection,
    "Curator.Heartbeat",
    (leader) => {
      const call = leader.curator.heartbeat();
      call.write({});
      return call;
    },
    new AbortController().signal,
  );
  return stream;
}

/**
 * 6,000 sleeps. Raced against the stream's end instead (as the heartbeat
 * did), each left about 300 bytes on it: 1.8 MB. Without, the heap grows by
 * well under the bound.
 */
const SLEEPS = 6000;
const MAX_GROWTH = 600 * 1024;

describe("CuratorStream.sleep", () => {
  it("waits its time on a live stream, and leaves nothing behind however often it is called", async () => {
    const stream = await heartbeatStream();
    try {
      const signal = new AbortController().signal;
      const start = performance.now();
      await stream.sleep(50, signal);
      expect(performance.now() - start).toBeGreaterThanOrEqual(45);

      await stream.sleep(0, signal); // warm-up: what the first sleeps make once
      const before = liveHeapBytes();
      for (let i = 0; i < SLEEPS; i++) await stream.sleep(0, signal);
      expect(liveHeapBytes() - before).toBeLessThan(MAX_GROWTH);
    } finally {
      stream.cancel();
    }
  });

  it("ends at once with the stream's failure when the stream breaks meanwhile", async () => {
    const stream = await heartbeatStream();
    const sleeping = stream.sleep(60_000, new AbortController().signal);
    stream.cancel();
    await expect(sleeping).rejects.toBeInstanceOf(CuratorStreamError);
    // And a sleep on a broken stream fails as it starts.
    await expect(stream.sleep(60_000, new AbortController().signal)).rejects.toBeInstanceOf(
      CuratorStreamError,
    );
  });

  it("ends at once with the abort reason when its caller stops", async () => {
    const stream = await heartbeatStream();
    try {
      const stop = new AbortController();
      const reason = new Error("stopping");
      const sleeping = stream.sleep(60_000, stop.signal);
      stop.abort(reason);
      await expect(sleeping).rejects.toBe(reason);
      // The stream is still usable: the next sleep runs its course.
      await stream.sleep(1, new AbortController().signal);
    } finally {
      stream.cancel();
    }
  });
});
