/** Node health as the leader's heartbeat tracker judges it, on a controlled clock. */
import { common } from "@metropolis/proto";
import { HeartbeatTracker } from "../src/heartbeat-tracker";

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
});
