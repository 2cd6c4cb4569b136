/** Node health as the leader's heartbeat tracker judges it, on a controlled clock. */
import { common } from "@metropolis/proto";
import { HeartbeatTracker, type HealthChanges } from "../src/heartbeat-tracker";

describe("HeartbeatTracker", () => {
  it("judges heartbeats against the timeout, and unseen nodes by the leadership's age", () => {
    let now = 1_000;
    const tracker = new HeartbeatTracker(100, () => now);
    // A new leader: nothing heard yet, and too early to tell.
    expect(tracker.health("a")).toBe(common.NodeHealth.UNKNOWN);
    tracker.beat("a");
    expect(tracker.health("a")).toBe(common.NodeHealth.HEALTHY);
    now += 100;
    expect(tracker.health("a")).toBe(common.NodeHealth.HEALTHY);
    expect(tracker.health("b")).toBe(common.NodeHealth.UNKNOWN);
    now += 1;
    expect(tracker.health("a")).toBe(common.NodeHealth.HEARTBEAT_TIMEOUT);
    // A node silent for a whole timeout of this leadership would have beaten if it lived.
    expect(tracker.health("b")).toBe(common.NodeHealth.HEARTBEAT_TIMEOUT);
    expect(tracker.sinceLast("a")).toBe(101);
    expect(tracker.sinceLast("b")).toBeUndefined();
  });

  it("follows the cluster configuration's timeout, and its local default when unset", () => {
    let now = 0;
    const tracker = new HeartbeatTracker(100, () => now);
    tracker.beat("a");
    now += 150;
    expect(tracker.health("a")).toBe(common.NodeHealth.HEARTBEAT_TIMEOUT);
    tracker.configure(common.ClusterConfiguration.fromPartial({ heartbeatTimeoutMs: 1_000 }));
    expect(tracker.timeoutMs).toBe(1_000);
    expect(tracker.health("a")).toBe(common.NodeHealth.HEALTHY);
    tracker.configure(common.ClusterConfiguration.fromPartial({ heartbeatTimeoutMs: 0 }));
    expect(tracker.timeoutMs).toBe(100);
    expect(tracker.health("a")).toBe(common.NodeHealth.HEARTBEAT_TIMEOUT);
    tracker.configure(undefined);
    expect(tracker.timeoutMs).toBe(100);
  });

  it("tells subscribers each health change once: heartbeats at once, timeouts at the next check", () => {
    let now = 0;
    const tracker = new HeartbeatTracker(100, () => now);
    tracker.beat("a");
    const seen: HealthChanges[][] = [[], []];
    const stops = seen.map((changes) => tracker.onHealthChange((c) => changes.push(c)));
    tracker.checkHealth();
    expect(seen[0]).toEqual([]); // nothing changed since subscribing
    now += 101;
    tracker.checkHealth();
    tracker.checkHealth(); // told once, not at every check
    // "a" timed out; so did every node never heard from (the leadership is 101 ms old).
    for (const changes of seen)
      expect(changes).toEqual([{ nodes: ["a"], unheard: true, beaten: [] }]);
    tracker.beat("a");
    tracker.beat("a");
    tracker.beat("b");
    for (const changes of seen) {
      expect(changes.slice(1)).toEqual([
        { nodes: ["a"], unheard: false, beaten: [] },
        { nodes: ["b"], unheard: false, beaten: [] },
      ]);
    }
    // Beats without a change of health are told at the next check, once.
    now += 50;
    tracker.beat("a");
    tracker.checkHealth();
    tracker.checkHealth();
    for (const changes of seen) {
      expect(changes.slice(3)).toEqual([{ nodes: [], unheard: false, beaten: ["a"] }]);
    }
    stops[0]();
    now += 101;
    tracker.checkHealth();
    expect(seen[0]).toHaveLength(4);
    expect(seen[1].slice(4)).toEqual([{ nodes: ["a", "b"], unheard: false, beaten: [] }]);
    // The last subscriber gone, the tracker keeps nothing for them and checks nothing.
    stops[1]();
    now += 1_000;
    tracker.checkHealth();
    expect(seen[1]).toHaveLength(5);
  });
});

describe("HeartbeatTracker's default clock", () => {
  it("is monotonic and whole: a wall-clock jump changes no health", () => {
    const realNow = Date.now;
    const tracker = new HeartbeatTracker(1000);
    try {
      tracker.beat("n");
      // The wall clock jumps a minute forward, then two back: nothing the tracker reads.
      Date.now = () => realNow() + 60_000;
      expect(tracker.health("n")).toBe(common.NodeHealth.HEALTHY);
      Date.now = () => realNow() - 60_000;
      expect(tracker.sinceLast("n")).toBeGreaterThanOrEqual(0);
      expect(Number.isInteger(tracker.now())).toBe(true);
    } finally {
      Date.now = realNow;
    }
  });
});
