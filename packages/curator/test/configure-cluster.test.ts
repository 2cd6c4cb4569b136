/**
 * Management.ConfigureCluster against a real leader (startLeader): reading
 * the configuration, a masked change, the optimistic-concurrency base check,
 * validation, and authorization.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { api, common } from "@metropolis/proto";
import { startLeader, type ClientIdentity, type LeaderFixture } from "@metropolis/curator/testing";
import { managementServer } from "../src/management-service";
import { maxMaskPaths } from "../src/management-configuration";
import { expectCode } from "./expect-code";

type Callback<Res> = (err: ServiceError | null, res?: Res) => void;

function promised(client: api.ManagementClient) {
  const call = <Res>(f: (cb: Callback<Res>) => unknown) =>
    new Promise<Res>((resolve, reject) =>
      f((err, res) => (err ? reject(err) : resolve(res as Res))),
    );
  return {
    getClusterInfo: () => call<api.GetClusterInfoResponse>((cb) => client.getClusterInfo({}, cb)),
    configureCluster: (req: Partial<api.ConfigureClusterRequest>) =>
      call<api.ConfigureClusterResponse>((cb) =>
        client.configureCluster(api.ConfigureClusterRequest.fromPartial(req), cb),
      ),
  };
}
type Management = ReturnType<typeof promised>;

const { ENCRYPTED, INSECURE, AUTHENTICATED_ENCRYPTED } = common.StoragePolicy;

let leader: LeaderFixture;
let owner: Management;

const clientAs = async (identity: ClientIdentity): Promise<Management> =>
  promised(await leader.client(api.ManagementClient, identity));

const current = async (): Promise<common.ClusterConfiguration | undefined> =>
  (await owner.getClusterInfo()).clusterConfiguration;

beforeAll(async () => {
  leader = await startLeader({
    services: (ctx) => [[api.ManagementService, managementServer(ctx)]],
  });
  owner = await clientAs("owner");
}, 30_000);

afterAll(async () => {
  await leader?.stop();
});

describe("ConfigureCluster", () => {
  it("with an empty mask changes nothing and returns the configuration set at bootstrap", async () => {
    const res = await owner.configureCluster({});
    expect(res.resultingConfig).toEqual({ storagePolicy: ENCRYPTED });
    expect(await current()).toEqual({ storagePolicy: ENCRYPTED });
  });

  it("changes the masked field when the base matches, and GetClusterInfo shows it", async () => {
    const res = await owner.configureCluster({
      baseConfig: { storagePolicy: ENCRYPTED },
      newConfig: { storagePolicy: AUTHENTICATED_ENCRYPTED },
      updateMask: ["storage_policy"],
    });
    expect(res.resultingConfig).toEqual({ storagePolicy: AUTHENTICATED_ENCRYPTED });
    expect(await current()).toEqual({ storagePolicy: AUTHENTICATED_ENCRYPTED });
    // Setting it again to what it is succeeds and changes nothing.
    const again = await owner.configureCluster({
      baseConfig: { storagePolicy: AUTHENTICATED_ENCRYPTED },
      newConfig: { storagePolicy: AUTHENTICATED_ENCRYPTED },
      updateMask: ["storage_policy"],
    });
    expect(again.resultingConfig).toEqual({ storagePolicy: AUTHENTICATED_ENCRYPTED });
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
      /update_mask: "cluster_domain" is not a configurable field \(configurable: storage_policy\)/,
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
  ] as Array<[string, Partial<api.ConfigureClusterRequest>, RegExp]>)(
    "refuses %s with INVALID_ARGUMENT naming the field, changing nothing",
    async (_what, req, message) => {
      const before = await current();
      await expectCode(owner.configureCluster(req), status.INVALID_ARGUMENT, message);
      expect(await current()).toEqual(before);
    },
  );

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
