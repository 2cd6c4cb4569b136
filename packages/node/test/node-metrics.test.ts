/**
 * The node's gauges follow its cluster status, its control plane's curator
 * leadership and its workloads, as a scrape would see them.
 */
import { ClusterManager, ClusterStatus } from "@metropolis/cluster";
import { MemoryValue } from "@metropolis/event";
import { placeNodeRoot } from "@metropolis/localstorage";
import { common } from "@metropolis/proto";
import { Roleserver, type LocalControlPlane } from "@metropolis/roleserve";
import { eventually, testHarness } from "@metropolis/supervisor/testing";
import { Registry } from "prom-client";
import { nodeMetricsRunnable } from "../src/node-metrics";

describe("nodeMetricsRunnable", () => {
  it("reports cluster state, consensus, leadership and workloads", async () => {
    const storage = placeNodeRoot("/nonexistent/metrics-test");
    const roleserver = new Roleserver({
      storage,
      machineKeyPath: "/nonexistent/machine.key",
      host: "127.0.0.1",
      version: "test",
      bootId: "test",
    });
    const manager = new ClusterManager({
      storage,
      machineKeyPath: "/nonexistent/machine.key",
      roleserver,
      address: "127.0.0.1",
    });
    const registry = new Registry();
    const harness = testHarness(nodeMetricsRunnable(registry, manager, roleserver));
    try {
      await harness.waitFor("root", "healthy");
      const scrape = async () => (await registry.metrics()).split("\n");
      expect(await scrape()).toEqual(
        expect.arrayContaining([
          'metropolis_cluster_state{state="UNKNOWN"} 1',
          "metropolis_curator_leader 0",
          "metropolis_workloads_running 0",
        ]),
      );

      const credentials = {
        nodeId: "metropolis-aa",
        privateKey: new Uint8Array(32),
        certificate: new Uint8Array(),
        caCertificate: new Uint8Array(),
      };
      manager.status.set(new ClusterStatus(common.ClusterState.HOME, credentials));
      const leader = new MemoryValue<{ nodeId: string; host: string; port: number } | undefined>(
        undefined,
      );
      // Only the curator's leader value is read from the control plane.
      roleserver.values.localControlPlane.set({
        curator: { leader },
      } as unknown as LocalControlPlane);
      leader.set({ nodeId: "metropolis-aa", host: "127.0.0.1", port: 7835 });
      roleserver.values.workloadStatus.set({ running: true, workloads: ["a", "b"] });
      await eventually(async () => {
        const lines = await scrape();
        return (
          lines.includes('metropolis_cluster_state{state="HOME"} 1') &&
          lines.includes("metropolis_curator_leader 1") &&
          lines.includes("metropolis_workloads_running 2")
        );
      }, "the gauges to follow the values");

      // Another curator leads; then the control plane goes away.
      leader.set({ nodeId: "metropolis-bb", host: "127.0.0.2", port: 7835 });
      await eventually(
        async () => (await scrape()).includes("metropolis_curator_leader 0"),
        "leadership to be lost",
      );
      leader.set({ nodeId: "metropolis-aa", host: "127.0.0.1", port: 7835 });
      roleserver.values.localControlPlane.set(undefined);
      await eventually(
        async () => (await scrape()).includes("metropolis_curator_leader 0"),
        "no control plane, no leadership",
      );
    } finally {
      await harness.cleanup();
    }
  });
});
