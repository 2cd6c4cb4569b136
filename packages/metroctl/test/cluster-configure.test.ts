/**
 * `metroctl cluster configure get|set` against a real curator leader, and
 * `bootstrap-params --storage-policy`: what they print, and that a change
 * really reached the cluster (read back with GetClusterInfo).
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { api, common } from "@metropolis/proto";
import { metroctl, clusterPerFile, tempDir, type MetroctlCluster } from "./cluster-fixture";

let cluster: MetroctlCluster;
let config: string;

clusterPerFile((c, dir) => ((cluster = c), (config = dir)));

const oneErrorLine = (stderr: string) => {
  const lines = stderr.split("\n").filter((l) => l !== "");
  expect(lines).toHaveLength(1);
  return lines[0];
};

async function storedPolicy(): Promise<common.StoragePolicy | undefined> {
  const management = await cluster.leader.client(api.ManagementClient, "owner");
  const info = await new Promise<api.GetClusterInfoResponse>((resolve, reject) =>
    management.getClusterInfo({}, (err, r) => (err ? reject(err) : resolve(r))),
  );
  return info.clusterConfiguration?.storagePolicy;
}

describe("cluster configure", () => {
  it("get shows every field, one field, or JSON", async () => {
    expect(await metroctl(config, ["cluster", "configure", "get"])).toMatchObject({
      code: 0,
      stdout: "storage_policy: encrypted\nheartbeat_timeout_ms: default\n",
      stderr: "",
    });
    expect(await metroctl(config, ["cluster", "configure", "get", "storage-policy"])).toMatchObject(
      { code: 0, stdout: "encrypted\n" },
    );
    const json = await metroctl(config, ["cluster", "configure", "get", "-o", "json"]);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({
      storage_policy: "encrypted",
      heartbeat_timeout_ms: "default",
    });
  });

  it("set changes the field in the cluster and says when it takes effect", async () => {
    const res = await metroctl(config, [
      "cluster",
      "configure",
      "set",
      "storage_policy",
      "authenticated-encrypted",
    ]);
    expect(res).toMatchObject({ code: 0, stderr: "" });
    expect(res.stdout).toBe(
      "storage_policy: encrypted → authenticated-encrypted (applies to nodes that register afterwards; nodes already in the cluster keep theirs)\n",
    );
    expect(await storedPolicy()).toBe(common.StoragePolicy.AUTHENTICATED_ENCRYPTED);
    const again = await metroctl(config, [
      "cluster",
      "configure",
      "set",
      "storage-policy",
      "AUTHENTICATED_ENCRYPTED",
    ]);
    expect(again).toMatchObject({
      code: 0,
      stdout: "storage_policy is already authenticated-encrypted\n",
    });
    await metroctl(config, ["cluster", "configure", "set", "storage_policy", "encrypted"]);
    expect(await storedPolicy()).toBe(common.StoragePolicy.ENCRYPTED);
  });

  it("set heartbeat_timeout_ms changes the running leader's timeout, and default restores it", async () => {
    const { heartbeats } = cluster.leader.ctx;
    const localDefault = heartbeats.timeoutMs;
    const res = await metroctl(config, [
      "cluster",
      "configure",
      "set",
      "heartbeat-timeout-ms",
      "30000",
    ]);
    expect(res).toMatchObject({ code: 0, stderr: "" });
    expect(res.stdout).toBe(
      "heartbeat_timeout_ms: default → 30000 (applies at once to the leader's health answers, and to every later leader)\n",
    );
    expect(heartbeats.timeoutMs).toBe(30_000);
    expect(
      (await metroctl(config, ["cluster", "configure", "get", "heartbeat_timeout_ms"])).stdout,
    ).toBe("30000\n");
    await metroctl(config, ["cluster", "configure", "set", "heartbeat_timeout_ms", "default"]);
    expect(heartbeats.timeoutMs).toBe(localDefault);
  });

  it.each([
    [
      ["set", "storage_policy", "plaintext"],
      'metroctl: cluster configure: storage_policy: "plaintext" is not one of insecure, encrypted, authenticated-encrypted',
    ],
    [
      ["set", "cluster_domain", "x"],
      'metroctl: cluster configure: "cluster_domain" is not a cluster configuration field (fields: storage_policy, heartbeat_timeout_ms)',
    ],
    [
      ["get", "cluster_domain"],
      'metroctl: cluster configure: "cluster_domain" is not a cluster configuration field (fields: storage_policy, heartbeat_timeout_ms)',
    ],
    [
      ["set", "heartbeat_timeout_ms", "500"],
      'metroctl: cluster configure: heartbeat_timeout_ms: "500" is not a timeout in milliseconds from 1000 to 3600000, or default',
    ],
    [
      ["set", "storage_policy"],
      "metroctl: cluster configure: usage: cluster configure get [FIELD] | cluster configure set FIELD VALUE",
    ],
  ])("refuses %j before asking the cluster, changing nothing", async (args, message) => {
    const res = await metroctl(config, ["cluster", "configure", ...args]);
    expect(res.code).not.toBe(0);
    expect(oneErrorLine(res.stderr)).toBe(message);
    expect(await storedPolicy()).toBe(common.StoragePolicy.ENCRYPTED);
  });
});

describe("bootstrap-params --storage-policy, --heartbeat-timeout-ms", () => {
  it("puts the initial configuration into the parameters", async () => {
    const dir = await tempDir("bootstrap-policy");
    const out = join(dir, "params.pb");
    const res = await metroctl(join(dir, "config"), [
      "bootstrap-params",
      "-o",
      out,
      "--storage-policy",
      "insecure",
      "--heartbeat-timeout-ms",
      "20000",
    ]);
    expect(res.code).toBe(0);
    const params = api.NodeParameters.decode(await readFile(out));
    expect(params.cluster?.$case).toBe("clusterBootstrap");
    const bootstrap = (params.cluster as { clusterBootstrap: api.NodeParameters_ClusterBootstrap })
      .clusterBootstrap;
    expect(bootstrap.initialClusterConfiguration).toEqual({
      storagePolicy: common.StoragePolicy.INSECURE,
      heartbeatTimeoutMs: 20_000,
    });
  });

  it("leaves the initial configuration out without them", async () => {
    const dir = await tempDir("bootstrap-default");
    const out = join(dir, "params.pb");
    expect((await metroctl(join(dir, "config"), ["bootstrap-params", "-o", out])).code).toBe(0);
    const params = api.NodeParameters.decode(await readFile(out));
    expect(
      (params.cluster as { clusterBootstrap: api.NodeParameters_ClusterBootstrap }).clusterBootstrap
        .initialClusterConfiguration,
    ).toBeUndefined();
  });

  it("refuses an unknown policy without writing anything", async () => {
    const dir = await tempDir("bootstrap-bad-policy");
    const out = join(dir, "params.pb");
    const res = await metroctl(join(dir, "config"), [
      "bootstrap-params",
      "-o",
      out,
      "--storage-policy",
      "rot13",
    ]);
    expect(res.code).not.toBe(0);
    expect(oneErrorLine(res.stderr)).toBe(
      'metroctl: bootstrap-params: --storage-policy: "rot13" is not one of insecure, encrypted, authenticated-encrypted',
    );
    await expect(readFile(out)).rejects.toThrow();
  });
});
