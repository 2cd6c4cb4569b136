/**
 * The heartbeat worker against a real curator: it keeps its node HEALTHY
 * past the curator's heartbeat timeout, stops beating when stopped, and
 * fails (to be restarted onto the new curator) when its stream breaks.
 */
import { common } from "@metropolis/proto";
import { Backoff, resolveBackoff } from "@metropolis/supervisor";
import { MockContext, testHarness, eventually } from "@metropolis/supervisor/testing";
import { CuratorStreamError } from "../src/errors";
import {
  defaultHeartbeatIntervalMs,
  heartbeatRestartBackoff,
  heartbeatWorker,
  type HeartbeatOptions,
} from "../src/heartbeat";
import { RoleserveValues } from "../src/values";
import { startTestCluster, type TestCluster } from "./curator-fixture";

/** Short, so that a node that stops beating times out within the test. */
const HEARTBEAT_TIMEOUT_MS = 600;
const INTERVAL_MS = 100;

let cluster: TestCluster;
beforeAll(async () => {
  cluster = await startTestCluster({ heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS });
});
afterAll(() => cluster?.stop());

const healthOf = async (nodeId: string) => (await cluster.getNode(nodeId))?.health;

/** Runs a worker for a new node of the cluster, connected from the start, on a MockContext. */
async function connectedWorker(opts: HeartbeatOptions) {
  const node = await cluster.addNode();
  const values = new RoleserveValues();
  values.curatorConnection.set(cluster.connect(node));
  const ctx = new MockContext("root.heartbeat");
  return { ctx, result: heartbeatWorker(values, opts)(ctx) };
}

describe("heartbeatWorker", () => {
  it("beats more often than the curator's default timeout", () => {
    // The curator's HeartbeatTracker default: a node is timed out after 10 s.
    expect(defaultHeartbeatIntervalMs).toBeLessThan(10_000);
    expect(() => heartbeatWorker(new RoleserveValues(), { intervalMs: 0 })).toThrow(RangeError);
    expect(() => heartbeatWorker(new RoleserveValues(), { jitter: 1 })).toThrow(/jitter/);
    expect(() => heartbeatWorker(new RoleserveValues(), { jitter: -0.1 })).toThrow(/jitter/);
  });

  describe("spreads its beats", () => {
    afterEach(() => jest.restoreAllMocks());

    /**
     * Runs a worker until `beats` heartbeats after the first were answered
     * and resolves to when it became healthy (just after the first beat
     * was answered) and when each later beat was sent (`performance.now()`).
     */
    async function beatTimes(intervalMs: number, beats: number) {
      const sent: number[] = [];
      const { ctx, result } = await connectedWorker({
        intervalMs,
        onAnswered: (ms) => sent.push(performance.now() - ms),
      });
      try {
        await eventually(() => ctx.state === "healthy", "the worker healthy");
        const healthyAt = performance.now();
        await eventually(() => sent.length >= beats, `${beats} more heartbeats answered`, {
          timeoutMs: 2 * beats * intervalMs + 10_000,
        });
        return { healthyAt, sent };
      } finally {
        ctx.abort();
        await result;
        expect(ctx.failures).toEqual([]);
      }
    }

    it("at a random phase of the interval, and each pause up to 10 % shorter than the interval", async () => {
      // The lowest draw: the second beat at once, every pause 10 % short.
      jest.spyOn(Math, "random").mockReturnValue(0);
      const { healthyAt, sent } = await beatTimes(2000, 2);
      // Without the random phase the second beat would come a whole interval after the first.
      expect(sent[0] - healthyAt).toBeLessThan(1000);
      // A timer may fire up to a millisecond early by the clock: a few ms of slack.
      expect(sent[1] - sent[0]).toBeGreaterThanOrEqual(1800 - 5);
      expect(sent[1] - sent[0]).toBeLessThan(2000);
    });

    it("and each pause up to 10 % longer than the interval", async () => {
      // The highest draw: the second beat an interval after the first, every pause 10 % long.
      jest.spyOn(Math, "random").mockReturnValue(0.9999);
      const { sent } = await beatTimes(500, 3);
      // Without the jitter: 500 ms.
      expect(sent[1] - sent[0]).toBeGreaterThanOrEqual(550 - 5);
      expect(sent[2] - sent[1]).toBeGreaterThanOrEqual(550 - 5);
    });
  });

  it("paces its beats on the monotonic clock: the wall clock set back a minute does not hold the next beat back", async () => {
    const sent: number[] = [];
    const realNow = Date.now.bind(Date);
    const { ctx, result } = await connectedWorker({
      intervalMs: INTERVAL_MS,
      onAnswered: (ms) => {
        sent.push(performance.now() - ms);
        // Set back just before the worker computes its next pause: on the
        // wall clock, that pause was the interval plus the minute.
        if (sent.length === 1) jest.spyOn(Date, "now").mockImplementation(() => realNow() - 60_000);
      },
    });
    try {
      await eventually(() => sent.length >= 1, "a beat answered, the clock set back");
      // Begun on the clock as set back: its own time runs as the worker's would.
      await eventually(() => sent.length >= 5, "four more beats after the clock was set back", {
        timeoutMs: 20_000,
      });
    } finally {
      jest.restoreAllMocks();
      ctx.abort();
      await result;
    }
    expect(ctx.failures).toEqual([]);
  });

  it("waits for a connection, keeps its node HEALTHY past the timeout, and stops beating when stopped", async () => {
    const node = await cluster.addNode();
    const values = new RoleserveValues();
    const ctx = new MockContext("root.heartbeat");
    const result = heartbeatWorker(values, { intervalMs: INTERVAL_MS })(ctx);
    try {
      expect(await healthOf(node.nodeId)).not.toBe(common.NodeHealth.HEALTHY);
      values.curatorConnection.set(cluster.connect(node));
      await eventually(() => ctx.state === "healthy", "the worker healthy");
      expect(await healthOf(node.nodeId)).toBe(common.NodeHealth.HEALTHY);

      // One beat would be forgotten after the timeout: the node must stay
      // HEALTHY for several timeouts in a row.
      const since = Date.now();
      while (Date.now() - since < 3 * HEARTBEAT_TIMEOUT_MS) {
        expect(common.NodeHealth[(await healthOf(node.nodeId))!]).toBe("HEALTHY");
        await new Promise((r) => setTimeout(r, 50)); // poll interval, not a wait for an outcome
      }
    } finally {
      ctx.abort();
      await result;
    }
    expect(ctx.failures).toEqual([]);
    // Stopped means no more heartbeats (no timer or stream left behind).
    await eventually(
      async () => (await healthOf(node.nodeId)) === common.NodeHealth.HEARTBEAT_TIMEOUT,
      "the node timed out after the worker stopped",
    );
  });

  it("is restarted no later than a heartbeat interval after failing, however often it failed", () => {
    // The supervisor's own cap (60 s) would keep a node that failed a few
    // times in a row silent for longer than the curator's heartbeat timeout.
    for (const intervalMs of [defaultHeartbeatIntervalMs, 50]) {
      const backoff = new Backoff(resolveBackoff(heartbeatRestartBackoff(intervalMs)));
      const delays = Array.from({ length: 40 }, () => backoff.next());
      // ±50 % jitter around at most the interval.
      expect(Math.max(...delays)).toBeLessThanOrEqual(1.5 * intervalMs);
      expect(Math.max(...delays)).toBeGreaterThan(0.5 * intervalMs);
    }
  });

  it("hands each answered heartbeat's latency to onAnswered", async () => {
    const latencies: number[] = [];
    const { ctx, result } = await connectedWorker({
      intervalMs: INTERVAL_MS,
      onAnswered: (ms) => latencies.push(ms),
    });
    try {
      await eventually(() => latencies.length >= 3, "three heartbeats answered");
    } finally {
      ctx.abort();
      await result;
    }
    expect(ctx.failures).toEqual([]);
    // Each is the time from a write to its answer: positive, and within the
    // reply deadline (twice the interval), or the worker would have failed.
    for (const ms of latencies) {
      expect(ms).toBeGreaterThan(0);
      expect(ms).toBeLessThan(2 * INTERVAL_MS);
    }
  });

  it("fails when its stream breaks, and beats again once restarted on the new curator", async () => {
    const node = await cluster.addNode();
    const values = new RoleserveValues();
    values.curatorConnection.set(cluster.connect(node));
    const harness = testHarness(heartbeatWorker(values, { intervalMs: INTERVAL_MS }), {
      expectDeath: (dn) => dn === "root",
    });
    try {
      await harness.waitFor("root", "healthy");
      const died = harness.nextTransition((t) => t.dn === "root" && t.to === "dead", {
        timeoutMs: 20_000,
      });
      await cluster.restartCurator();
      const death = await died;
      expect(death.error).toBeInstanceOf(CuratorStreamError);
      // Neither the stream's error nor grpc-js's (its cause) carries frames of
      // ours: both are made without a stack trace (cheap by the thousand).
      const cause: unknown = death.error?.cause;
      if (!(cause instanceof Error)) throw new Error(`no gRPC cause: ${String(cause)}`);
      expect(death.error?.stack).toBe(`CuratorStreamError: ${death.error?.message}`);
      expect(cause.stack).toMatch(/\nfor call at\nno stack trace available$/);
      // The restarted worker finds the new curator and beats again.
      await harness.nextTransition((t) => t.dn === "root" && t.to === "healthy", {
        timeoutMs: 20_000,
      });
      await eventually(
        async () => (await healthOf(node.nodeId)) === common.NodeHealth.HEALTHY,
        "the node HEALTHY with the new curator",
      );
    } finally {
      await harness.cleanup();
    }
  });
});
