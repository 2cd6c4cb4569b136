/**
 * Management.ConfigureCluster against a real leader (startLeader): reading
 * the configuration, a masked change, the optimistic-concurrency base check,
 * validation, and authorization.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { api, common } from "@metropolis/proto";
import { startLeader, type ClientIdentity, type LeaderFixture } from "@metropolis/curator/testing";
import { managementServer, managementService } from "../src/management-service";
import { maxMaskPaths } from "../src/management-configuration";
import { expectCode } from "./expect-code";

interface Request {
  baseConfig?: Partial<common.ClusterConfiguration>;
  newConfig?: Partial<common.ClusterConfiguration>;
  updateMask?: string[];
}
type Callback<Res> = (err: ServiceError | null, res?: Res) => void;

function promised(client: api.ManagementClient) {
  const call = <Res>(f: (cb: Callback<Res>) => unknown) =>
    new Promise<Res>((resolve, reject) =>
      f((err, res) => (err ? reject(err) : resolve(res as Res))),
    );
  return {
    getClusterInfo: () => call<api.GetClusterInfoResponse>((cb) => client.getClusterInfo({}, cb)),
    configureCluster: (req: Request) =>
      call<api.ConfigureClusterResponse>((cb) =>
        client.configureCluster(api.ConfigureClusterRequest.fromPartial(req), cb),
      ),
  };
}
type Management = ReturnType<typeof promised>;

const { ENCRYPTED, INSECURE, AUTHENTICATED_ENCRYPTED } = common.StoragePolicy;

/** A whole configuration, as the cluster answers it. */
const cfg = (storagePolicy: common.StoragePolicy, heartbeatTimeoutMs = 0) => ({
  storagePolicy,
  heartbeatTimeoutMs,
});

let leader: LeaderFixture;
let owner: Management;

const clientAs = async (identity: ClientIdentity): Promise<Management> =>
  promised(await leader.client(api.ManagementClient, identity));

const current = async (): Promise<common.ClusterConfiguration | undefined> =>
  (await owner.getClusterInfo()).clusterConfiguration;

beforeAll(async () => {
  leader = await startLeader({
    services: (ctx) => [[managementService, managementServer(ctx)]],
  });
  owner = await clientAs("owner");
}, 30_000);

afterAll(async () => {
  await leader?.stop();
});

describe("ConfigureCluster", () => {
  it("with an empty mask changes nothing and returns the configuration set at bootstrap", async () => {
    const res = await owner.configureCluster({});
    expect(res.resultingConfig).toEqual(cfg(ENCRYPTED));
    expect(await current()).toEqual(cfg(ENCRYPTED));
  });

  it("changes the masked field when the base matches, and GetClusterInfo shows it", async () => {
    const res = await owner.configureCluster({
      baseConfig: { storagePolicy: ENCRYPTED },
      newConfig: { storagePolicy: AUTHENTICATED_ENCRYPTED },
      updateMask: ["storage_policy"],
    });
    expect(res.resultingConfig).toEqual(cfg(AUTHENTICATED_ENCRYPTED));
    expect(await current()).toEqual(cfg(AUTHENTICATED_ENCRYPTED));
    // Setting it again to what it is succeeds and changes nothing.
    const again = await owner.configureCluster({
      baseConfig: { storagePolicy: AUTHENTICATED_ENCRYPTED },
      newConfig: { storagePolicy: AUTHENTICATED_ENCRYPTED },
      updateMask: ["storage_policy"],
    });
    expect(again.resultingConfig).toEqual(cfg(AUTHENTICATED_ENCRYPTED));
  });

  it("refuses a base that no longer matches with FAILED_PRECONDITION, changing nothing", async () => {
    const before = await current();
    await expectCode(
      owner.configureCluster({
        baseConfig: { storagePolicy: INSECURE },
        newConfig: { storagePolicy: ENCRYPTED },
        updateMask: ["storage_policy"],
      }),
      status.FAILED_PRECONDITION,
      /base_config\.storage_policy is INSECURE but the cluster's is AUTHENTICATED_ENCRYPTED/,
    );
    expect(await current()).toEqual(before);
  });

  it("of two owners changing from the same base, lets the first win and refuses the second", async () => {
    const base = (await current())!;
    const results = await Promise.allSettled([
      owner.configureCluster({
        baseConfig: base,
        newConfig: { storagePolicy: INSECURE },
        updateMask: ["storage_policy"],
      }),
      owner.configureCluster({
        baseConfig: base,
        newConfig: { storagePolicy: ENCRYPTED },
        updateMask: ["storage_policy"],
      }),
    ]);
    const ok = results.filter((r) => r.status === "fulfilled");
    const refused = results.filter((r) => r.status === "rejected");
    expect(ok).toHaveLength(1);
    expect(refused).toHaveLength(1);
    expect((refused[0].reason as ServiceError).code).toBe(status.FAILED_PRECONDITION);
    expect(await current()).toEqual(ok[0].value.resultingConfig);
  });

  it.each([
    [
      "an unknown mask path",
      { updateMask: ["cluster_domain"] },
      /update_mask: "cluster_domain" is not a configurable field \(configurable: storage_policy, heartbeat_timeout_ms\)/,
    ],
    [
      "too many mask paths",
      { updateMask: Array<string>(maxMaskPaths + 1).fill("storage_policy") },
      /update_mask has 17 paths/,
    ],
    [
      "a mask path of 100 000 characters, quoted in part",
      { updateMask: ["p".repeat(100_000)] },
      /update_mask: "p{64}"\.\.\. \(100000 characters\) is not a configurable field/,
    ],
    [
      "no base",
      { newConfig: { storagePolicy: ENCRYPTED }, updateMask: ["storage_policy"] },
      /base_config is required/,
    ],
    [
      "no new configuration",
      { baseConfig: { storagePolicy: ENCRYPTED }, updateMask: ["storage_policy"] },
      /new_config is required/,
    ],
    [
      "an unspecified storage policy",
      {
        baseConfig: { storagePolicy: ENCRYPTED },
        newConfig: { storagePolicy: common.StoragePolicy.UNSPECIFIED },
        updateMask: ["storage_policy"],
      },
      /new_config\.storage_policy: UNSPECIFIED is not a storage policy \(one of INSECURE, ENCRYPTED, AUTHENTICATED_ENCRYPTED\)/,
    ],
    [
      "an unknown storage policy",
      {
        baseConfig: { storagePolicy: ENCRYPTED },
        newConfig: { storagePolicy: 42 as common.StoragePolicy },
        updateMask: ["storage_policy"],
      },
      /new_config\.storage_policy: 42 is not a storage policy/,
    ],
    [
      "a heartbeat timeout under a second",
      {
        baseConfig: {},
        newConfig: { heartbeatTimeoutMs: 999 },
        updateMask: ["heartbeat_timeout_ms"],
      },
      /new_config\.heartbeat_timeout_ms: 999 is out of range \(0 for the curators' default, or 1000 to 3600000\)/,
    ],
    [
      "a heartbeat timeout over an hour",
      {
        baseConfig: {},
        newConfig: { heartbeatTimeoutMs: 3_600_001 },
        updateMask: ["heartbeat_timeout_ms"],
      },
      /new_config\.heartbeat_timeout_ms: 3600001 is out of range/,
    ],
  ] as Array<[string, Request, RegExp]>)(
    "refuses %s with INVALID_ARGUMENT naming the field, changing nothing",
    async (_what, req, message) => {
      const before = await current();
      await expectCode(owner.configureCluster(req), status.INVALID_ARGUMENT, message);
      expect(await current()).toEqual(before);
    },
  );

  it("changes the heartbeat timeout of the running leader at once, and back to the default", async () => {
    const { heartbeats } = leader.ctx;
    const localDefault = heartbeats.timeoutMs;
    const node = await leader.addNode({ state: common.NodeState.UP });
    heartbeats.beat(node.nodeId);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    // Just beaten a second ago: healthy under the 10 s default, timed out under one second.
    expect(heartbeats.health(node.nodeId)).toBe(common.NodeHealth.HEALTHY);
    const base = (await current())!;
    const res = await owner.configureCluster({
      baseConfig: base,
      newConfig: { heartbeatTimeoutMs: 1_000 },
      updateMask: ["heartbeat_timeout_ms"],
    });
    expect(res.resultingConfig).toEqual(cfg(base.storagePolicy, 1_000));
    expect(heartbeats.timeoutMs).toBe(1_000);
    expect(heartbeats.health(node.nodeId)).toBe(common.NodeHealth.HEARTBEAT_TIMEOUT);

    await owner.configureCluster({
      baseConfig: res.resultingConfig,
      newConfig: { heartbeatTimeoutMs: 0 },
      updateMask: ["heartbeat_timeout_ms"],
    });
    expect(heartbeats.timeoutMs).toBe(localDefault);
    expect(heartbeats.health(node.nodeId)).toBe(common.NodeHealth.HEALTHY);
    expect(await current()).toEqual(cfg(base.storagePolicy, 0));
  });

  it("changes two fields in one call, or neither when one is invalid", async () => {
    const base = (await current())!;
    await expectCode(
      owner.configureCluster({
        baseConfig: base,
        newConfig: { storagePolicy: INSECURE, heartbeatTimeoutMs: 5 },
        updateMask: ["storage_policy", "heartbeat_timeout_ms"],
      }),
      status.INVALID_ARGUMENT,
      /heartbeat_timeout_ms/,
    );
    expect(await current()).toEqual(base);
    const res = await owner.configureCluster({
      baseConfig: base,
      newConfig: { storagePolicy: INSECURE, heartbeatTimeoutMs: 30_000 },
      updateMask: ["storage_policy", "heartbeat_timeout_ms"],
    });
    expect(res.resultingConfig).toEqual(cfg(INSECURE, 30_000));
    expect(leader.ctx.heartbeats.timeoutMs).toBe(30_000);
    // Fields outside the mask are not compared and not changed.
    const only = await owner.configureCluster({
      baseConfig: { storagePolicy: INSECURE, heartbeatTimeoutMs: 1 },
      newConfig: { storagePolicy: ENCRYPTED, heartbeatTimeoutMs: 1 },
      updateMask: ["storage_policy"],
    });
    expect(only.resultingConfig).toEqual(cfg(ENCRYPTED, 30_000));
    await owner.configureCluster({
      baseConfig: only.resultingConfig,
      newConfig: { heartbeatTimeoutMs: 0 },
      updateMask: ["heartbeat_timeout_ms"],
    });
  });

  it("is what a new leader's heartbeat tracker follows from the start", async () => {
    const other = await startLeader({
      configuration: common.ClusterConfiguration.fromPartial({
        storagePolicy: ENCRYPTED,
        heartbeatTimeoutMs: 2_000,
      }),
    });
    try {
      expect(other.ctx.heartbeats.timeoutMs).toBe(2_000);
    } finally {
      await other.stop();
    }
  });

  it.each([
    ["a node certificate", "node" as const, status.PERMISSION_DENIED],
    ["no certificate", "none" as const, status.UNAUTHENTICATED],
  ])("is refused to %s, changing nothing", async (_what, identity, code) => {
    const before = (await current())!;
    const other = before.storagePolicy === INSECURE ? ENCRYPTED : INSECURE;
    const client = await clientAs(identity);
    await expectCode(
      client.configureCluster({
        baseConfig: before,
        newConfig: { storagePolicy: other },
        updateMask: ["storage_policy"],
      }),
      code,
    );
    expect(await current()).toEqual(before);
  });
});
