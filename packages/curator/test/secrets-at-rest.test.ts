/**
 * Secrets at rest in the curator's namespace, against a real leader (one
 * etcd member, real mTLS): the cluster CA key, every cluster unlock key and
 * the register ticket are stored sealed, never as is; the owner rotates the
 * key that seals them with Management.RotateClusterSecretsKey, after which
 * every sealed value in etcd names the new key and everything still opens.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import {
  etcdCertificateKv,
  isSealedSecret,
  sealedKeyId,
  sealedKeyUsage,
} from "@metropolis/consensus";
import { api, curator } from "@metropolis/proto";
import { clusterUnlockKeyKey, registerTicketKey } from "../src/keys";
import { curatorServer } from "../src/curator-service";
import { managementServer, managementService } from "../src/management-service";
import { readClusterUnlockKey } from "../src/node-secrets";
import { startLeader, type LeaderFixture } from "@metropolis/curator/testing";
import { expectCode } from "./expect-code";

type Callback<Res> = (err: ServiceError | null, res?: Res) => void;
const call = <Res>(f: (cb: Callback<Res>) => unknown) =>
  new Promise<Res>((resolve, reject) => f((err, res) => (err ? reject(err) : resolve(res as Res))));

let leader: LeaderFixture;
let owner: api.ManagementClient;

beforeAll(async () => {
  leader = await startLeader({
    services: (ctx) => [
      [managementService, managementServer(ctx)],
      [curator.CuratorService, curatorServer(ctx)],
    ],
  });
  owner = await leader.client(api.ManagementClient, "owner");
}, 30_000);

afterAll(async () => {
  await leader?.stop();
});

/** The raw value at `key` of the curator namespace, as etcd stores it. */
async function raw(key: string): Promise<Buffer> {
  const value = await leader.ctx.kv.get(key).buffer();
  if (value === null) throw new Error(`${key} is not in etcd`);
  return value;
}

const rotate = (client: api.ManagementClient) =>
  call<api.RotateClusterSecretsKeyResponse>((cb) => client.rotateClusterSecretsKey({}, cb));

describe("secrets at rest", () => {
  it("stores the register ticket, every cluster unlock key and the CA key sealed", async () => {
    const { ticket } = await call<api.GetRegisterTicketResponse>((cb) =>
      owner.getRegisterTicket({}, cb),
    );
    const other = await leader.addNode();
    const caKey = (await leader.ctx.clusterCa.load(etcdCertificateKv(leader.ctx.kv)))
      ?.privateKey as Buffer;
    const stored: Array<[string, Buffer]> = [
      [registerTicketKey, Buffer.from(ticket)],
      [clusterUnlockKeyKey(leader.firstNode.nodeId), leader.firstNode.clusterUnlockKey],
      [clusterUnlockKeyKey(other.nodeId), other.clusterUnlockKey],
      [leader.ctx.clusterCa.keys.privateKey, caKey],
    ];
    for (const [key, secret] of stored) {
      const value = await raw(key);
      expect(isSealedSecret(value)).toBe(true);
      expect(sealedKeyId(value)).toBe(1);
      expect(value.includes(secret)).toBe(false);
    }
    expect(await readClusterUnlockKey(leader.ctx.kv, leader.ctx.secrets, other.nodeId)).toEqual(
      other.clusterUnlockKey,
    );
    // A sealed value moved to another key does not open there.
    await leader.ctx.kv
      .put(clusterUnlockKeyKey("metropolis-moved"))
      .value(await raw(clusterUnlockKeyKey(other.nodeId)));
    await expect(
      readClusterUnlockKey(leader.ctx.kv, leader.ctx.secrets, "metropolis-moved"),
    ).rejects.toThrow(/node_secrets\/metropolis-moved\/cluster_unlock_key.*authentication failed/);
    await leader.ctx.kv.delete().key(clusterUnlockKeyKey("metropolis-moved"));
  });

  it("RotateClusterSecretsKey is the owner's only", async () => {
    const node = await leader.client(api.ManagementClient, "node");
    await expectCode(rotate(node), status.PERMISSION_DENIED);
  });

  it("rotation re-seals every secret under a new key and retires the old one", async () => {
    const root = leader.member.status.client.kv;
    const before = await sealedKeyUsage(root);
    const total = [...before.values()].reduce((a, b) => a + b, 0);
    // The cluster CA key, the etcd CA key, two unlock keys, the ticket.
    expect(total).toBeGreaterThanOrEqual(5);
    const { ticket } = await call<api.GetRegisterTicketResponse>((cb) =>
      owner.getRegisterTicket({}, cb),
    );

    const first = await rotate(owner);
    expect(first).toEqual({ keyId: 2, retiredKeyIds: [1], resealed: total });
    expect(await sealedKeyUsage(root)).toEqual(new Map([[2, total]]));
    // Everything still opens: the ticket, the unlock key, the CA issues.
    const again = await call<api.GetRegisterTicketResponse>((cb) =>
      owner.getRegisterTicket({}, cb),
    );
    expect(Buffer.from(again.ticket)).toEqual(Buffer.from(ticket));
    expect(
      await readClusterUnlockKey(leader.ctx.kv, leader.ctx.secrets, leader.firstNode.nodeId),
    ).toEqual(leader.firstNode.clusterUnlockKey);
    expect(await leader.ctx.clusterCa.authority(etcdCertificateKv(leader.ctx.kv))).toBeDefined();
    // New secrets are sealed under the new key.
    const added = await leader.addNode();
    expect(sealedKeyId(await raw(clusterUnlockKeyKey(added.nodeId)))).toBe(2);

    const second = await rotate(owner);
    expect(second).toEqual({ keyId: 3, retiredKeyIds: [2], resealed: total + 1 });
    expect(await sealedKeyUsage(root)).toEqual(new Map([[3, total + 1]]));
  });
});
