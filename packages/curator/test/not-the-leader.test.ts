/**
 * A follower answers the leader's methods "not the leader" (UNAVAILABLE),
 * naming the leader in its details and trailing metadata, never
 * UNIMPLEMENTED (which gRPC clients take for "this method does not exist").
 * Real curators over real mutual TLS on a real etcd member
 * (curators-fixture.ts); the authorization matrix checks the code for every
 * method and caller, this the hint.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { api, curator } from "@metropolis/proto";
import { leaderAddressMetadataKey, leaderNodeMetadataKey } from "../src/not-the-leader";
import { startCurators, type CuratorsFixture } from "./curators-fixture";

let cluster: CuratorsFixture;

beforeAll(async () => {
  cluster = await startCurators();
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

/** Whether `e` is a gRPC call's error, with its status and trailing metadata. */
const isServiceError = (e: unknown): e is ServiceError =>
  e instanceof Error && "code" in e && "details" in e && "metadata" in e;

/** The error `call` failed with; fails the test when it succeeded or failed otherwise. */
async function refusal(call: Promise<unknown>): Promise<ServiceError> {
  try {
    await call;
  } catch (e) {
    if (isServiceError(e)) return e;
    throw e;
  }
  throw new Error("the call succeeded on a follower");
}

describe("a follower", () => {
  it("answers a leader-only unary call UNAVAILABLE, naming the leader", async () => {
    const { follower, leader, owner } = cluster;
    if (!follower) throw new Error("the fixture started no follower");
    const management = cluster.client(api.ManagementClient, follower.address, owner.tls);
    const e = await refusal(
      new Promise((resolve, reject) =>
        management.getRegisterTicket({}, (err, res) => (err ? reject(err) : resolve(res))),
      ),
    );
    expect(e.code).toBe(status.UNAVAILABLE);
    expect(e.details).toBe(
      `not the leader: this curator follows; the leader is ${leader.endpoint.nodeId} at ${leader.address} (/metropolis.proto.api.Management/GetRegisterTicket is served by the leader only)`,
    );
    expect(e.metadata.get(leaderNodeMetadataKey)).toEqual([leader.endpoint.nodeId]);
    expect(e.metadata.get(leaderAddressMetadataKey)).toEqual([leader.address]);
  });

  it("ends a leader-only stream UNAVAILABLE, naming the leader", async () => {
    const { follower, leader, firstNode } = cluster;
    if (!follower) throw new Error("the fixture started no follower");
    const client = cluster.client(curator.CuratorClient, follower.address, firstNode.tls);
    const stream = client.watch({
      kind: { $case: "nodeInCluster", nodeInCluster: { nodeId: firstNode.nodeId } },
    });
    const e = await refusal(
      new Promise((resolve, reject) => {
        stream.on("data", resolve);
        stream.on("error", reject);
      }),
    );
    expect(e.code).toBe(status.UNAVAILABLE);
    expect(e.details).toContain(`the leader is ${leader.endpoint.nodeId} at ${leader.address}`);
    expect(e.metadata.get(leaderAddressMetadataKey)).toEqual([leader.address]);
  });
});
