import { Etcd3 } from "etcd3";
import { ConsensusClient } from "@metropolis/consensus";
import { MemoryValue } from "@metropolis/event";
import { common } from "@metropolis/proto";
import { ClusterStatus } from "@metropolis/cluster";
import {
  ConsensusRefusedError,
  DisownedError,
  NoLocalConsensusError,
  UnknownConsensusUserError,
} from "../src/errors";
import { getHome } from "../src/status-watcher";
import { type ConsensusUser } from "../src/status";

// Namespacing is computed locally: no etcd is contacted.
const etcd = new Etcd3({ hosts: "127.0.0.1:1" });
afterAll(() => etcd.close());
const local = ConsensusClient.root(etcd);

describe("ClusterStatus.consensusClient", () => {
  it("hands a confined client to known users of a HOME or SPLIT node that runs consensus", () => {
    for (const state of [common.ClusterState.HOME, common.ClusterState.SPLIT]) {
      const status = new ClusterStatus(state, undefined, local);
      expect(status.hasLocalConsensus).toBe(true);
      expect(status.consensusClient("curator").prefix).toBe("namespaced:curator/");
      expect(status.consensusClient("kubernetes-pki").prefix).toBe("namespaced:kubernetes-pki/");
      expect(status.consensusClient("workloads").prefix).toBe("namespaced:workloads/");
    }
  });

  it("refuses unknown users, nodes without consensus, and other states, each with its own error", () => {
    const home = new ClusterStatus(common.ClusterState.HOME, undefined, local);
    expect(() => home.consensusClient("root" as ConsensusUser)).toThrow(UnknownConsensusUserError);
    const noConsensus = new ClusterStatus(common.ClusterState.HOME);
    expect(noConsensus.hasLocalConsensus).toBe(false);
    expect(() => noConsensus.consensusClient("curator")).toThrow(NoLocalConsensusError);
    for (const state of [
      common.ClusterState.UNKNOWN,
      common.ClusterState.FOREIGN,
      common.ClusterState.TRUSTED,
      common.ClusterState.DISOWNING,
    ]) {
      const s = new ClusterStatus(state, undefined, local);
      expect(() => s.consensusClient("curator")).toThrow(ConsensusRefusedError);
    }
    expect(() =>
      new ClusterStatus(common.ClusterState.FOREIGN, undefined, local).consensusClient("curator"),
    ).toThrow("refusing a consensus client in cluster state CLUSTER_STATE_FOREIGN");
  });
});

describe("getHome", () => {
  it("waits through other states until HOME", async () => {
    const value = new MemoryValue(new ClusterStatus(common.ClusterState.UNKNOWN));
    const home = getHome(value);
    value.set(new ClusterStatus(common.ClusterState.FOREIGN));
    value.set(new ClusterStatus(common.ClusterState.TRUSTED));
    const done = new ClusterStatus(common.ClusterState.HOME);
    value.set(done);
    await expect(home).resolves.toBe(done);
  });

  it("rejects when the node is disowned", async () => {
    const value = new MemoryValue(new ClusterStatus(common.ClusterState.TRUSTED));
    const home = getHome(value);
    value.set(new ClusterStatus(common.ClusterState.DISOWNING));
    await expect(home).rejects.toBeInstanceOf(DisownedError);
  });

  it("rejects with the abort reason", async () => {
    const value = new MemoryValue<ClusterStatus>();
    const ac = new AbortController();
    const home = getHome(value, ac.signal);
    ac.abort(new Error("node shutting down"));
    await expect(home).rejects.toThrow("node shutting down");
  });
});
