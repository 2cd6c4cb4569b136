/**
 * A follower answers the leader's methods "not the leader" (UNAVAILABLE),
 * naming the leader in its details and trailing metadata, never
 * UNIMPLEMENTED (which gRPC clients take for "this method does not exist").
 * Real curators over real mutual TLS on a real etcd member
 * (curators-fixture.ts); the authorization matrix checks the code for every
 * method and caller, this the hint.
 */
import { Metadata, status, type ServiceError } from "@grpc/grpc-js";
import { api, curator } from "@metropolis/proto";
import {
  leaderAddressMetadataKey,
  leaderNodeMetadataKey,
  notTheLeader,
  notTheLeaderAnswer,
} from "../src/not-the-leader";
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
    // What the curator client reads off it, to go to the leader directly.
    expect(notTheLeaderAnswer(e)).toEqual({ leader: leader.endpoint });
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
    // As roleserve's CuratorStreamError carries it: as its cause.
    expect(notTheLeaderAnswer(new Error("stream failed", { cause: e }))).toEqual({
      leader: leader.endpoint,
    });
  });
});

describe("notTheLeaderAnswer", () => {
  const refused = (leader?: { nodeId: string; host: string; port: number }) => {
    const r = notTheLeader("/p", "this curator follows", leader);
    return Object.assign(new Error(r.details), r);
  };

  it("reads the leader named, an IPv6 address included, and no leader where none is named", () => {
    expect(notTheLeaderAnswer(refused({ nodeId: "n", host: "10.0.0.1", port: 7835 }))).toEqual({
      leader: { nodeId: "n", host: "10.0.0.1", port: 7835 },
    });
    expect(notTheLeaderAnswer(refused({ nodeId: "n", host: "fd00::1", port: 7835 }))).toEqual({
      leader: { nodeId: "n", host: "fd00::1", port: 7835 },
    });
    expect(notTheLeaderAnswer(refused())).toEqual({ leader: undefined });
  });

  it("is undefined for any other failure, UNAVAILABLE ones included", () => {
    const other = {
      code: status.UNAVAILABLE,
      details: "No connection established",
      metadata: new Metadata(),
    };
    expect(notTheLeaderAnswer(other)).toBeUndefined();
    expect(notTheLeaderAnswer({ ...refused(), code: status.INTERNAL })).toBeUndefined();
    expect(notTheLeaderAnswer(undefined)).toBeUndefined();
  });
});
