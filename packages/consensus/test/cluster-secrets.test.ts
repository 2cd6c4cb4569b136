/**
 * The cluster secrets keyring on real consensus members (real etcd, mutual
 * TLS between members): bootstrap makes it and seals the etcd CA key with it,
 * a joining member gets its wrapped copy through addNode and loads it while
 * still a learner, a member restarted from disk loads it again, and rotation
 * on a three-member cluster re-seals every secret, retires the old keys from
 * every copy, survives an interruption half-way (the next rotation finishes
 * the job), and leaves every secret openable on every member, also after the
 * rotating member is gone.
 */
import { randomBytes } from "node:crypto";
import {
  GuardLostError,
  isSealedSecret,
  keyringCopyKey,
  sealedKeyId,
  sealedKeyUsage,
  unwrapKeyring,
  type ConsensusClient,
  type WriteGuard,
} from "@metropolis/consensus";
import { TestMembers, type TestMember, type TestNode } from "@metropolis/consensus/testing";
import { eventually } from "@metropolis/supervisor/testing";

const fixture = new TestMembers();
afterEach(() => fixture.cleanup());

/** Joins `joiner` through `via` and waits until every member votes. */
async function join(via: TestMember, joiner: TestNode): Promise<TestMember> {
  const joined = await via.status.addNode(joiner.nodeId, joiner.publicKey, joiner.peer);
  const member = await fixture.run(joiner, { join: joined });
  await eventually(async () => {
    const members = await via.status.members();
    return members.every((m) => !m.isLearner && m.name !== "");
  }, "learners promoted");
  return member;
}

/** Stores `count` secrets sealed by `client`'s sealer; returns their plaintexts by key. */
async function storeSecrets(client: ConsensusClient, count: number): Promise<Map<string, Buffer>> {
  const secrets = new Map<string, Buffer>();
  for (let i = 0; i < count; i++) {
    const key = `secret-${String(i).padStart(4, "0")}`;
    const value = randomBytes(32);
    secrets.set(key, value);
    await client.kv.put(key).value(client.secrets.seal(key, value));
  }
  return secrets;
}

/** Expects every secret to open with `client`'s sealer (each member reads its own data). */
async function expectOpens(client: ConsensusClient, secrets: Map<string, Buffer>): Promise<void> {
  for (const [key, value] of secrets) {
    const sealed = await client.kv.get(key).buffer();
    expect(sealed).not.toBeNull();
    expect(await client.secrets.open(key, sealed as Buffer)).toEqual(value);
  }
}

/** The key ids of every member's copy, each unwrapped with that member's node key. */
async function copyKeyIds(member: TestMember, of: TestNode[]): Promise<number[][]> {
  const kv = member.status.client.kv;
  return Promise.all(
    of.map(async (node) => {
      const at = keyringCopyKey(node.nodeId);
      const wrapped = await kv.get(at).buffer();
      if (wrapped === null) throw new Error(`no keyring copy at ${at}`);
      return unwrapKeyring(wrapped, node.privateKey, at).ids;
    }),
  );
}

/** A guard like the curator leader's election key: a key that exists, by its create revision. */
async function makeGuard(client: ConsensusClient, name: string): Promise<WriteGuard> {
  const key = `namespaced:curator//leader/${name}`;
  await client.kv.put(key).value("guard");
  const found = await client.kv.get(key).exec();
  return { key, createRevision: found.kvs[0].create_revision };
}

describe("cluster secrets keyring", () => {
  it("is made at bootstrap, sealing the etcd CA key; a joiner and a restarted member load it", async () => {
    const [a, b] = [await fixture.node("ka"), await fixture.node("kb")];
    const first = await fixture.run(a, { bootstrap: true });
    const root = first.status.client;
    const caKey = await root.kv.get("namespaced:consensus/keys/etcd-ca-privkey.bin").buffer();
    expect(caKey !== null && isSealedSecret(caKey)).toBe(true);
    expect(await copyKeyIds(first, [a])).toEqual([[1]]);
    const secrets = await storeSecrets(root.sub("test"), 3);

    // addNode stores the joiner's copy before it starts; the joiner is running
    // (keyring loaded) while still a learner, which only serializable reads serve.
    const joined = await first.status.addNode(b.nodeId, b.publicKey, b.peer);
    expect(await copyKeyIds(first, [b])).toEqual([[1]]);
    // b is removed below, and a removed member's etcd exits.
    const second = await fixture.run(b, { join: joined }, { expectEtcdDeath: true });
    await expectOpens(second.status.client.sub("test"), secrets);

    // removeNode drops the member's copy.
    expect(await first.status.removeNode(b.nodeId)).toBe(true);
    expect(await root.kv.get(keyringCopyKey(b.nodeId)).buffer()).toBeNull();
    await fixture.stop(second);

    await fixture.stop(first);
    a.storage = await a.reopen();
    const restarted = await fixture.run(a, {});
    await expectOpens(restarted.status.client.sub("test"), secrets);
    // The etcd CA opens too: addNode issues a peer certificate with it.
    const c = await fixture.node("kc");
    await expect(restarted.status.addNode(c.nodeId, c.publicKey, c.peer)).resolves.toBeDefined();
  }, 90_000);

  it("rotates on three members: re-seals everything, retires old keys, survives an interruption and a failover", async () => {
    const [a, b, c] = [
      await fixture.node("ra"),
      await fixture.node("rb"),
      await fixture.node("rc"),
    ];
    const first = await fixture.run(a, { bootstrap: true });
    const second = await join(first, b);
    const third = await join(first, c);
    const members = [a, b, c];
    const root = first.status.client;
    const count = 300;
    const secrets = await storeSecrets(root.sub("test"), count);
    // The etcd CA key is sealed too.
    const total = count + 1;
    expect(await sealedKeyUsage(root.kv)).toEqual(new Map([[1, total]]));

    const rotated = await first.status.rotateSecretsKey(await makeGuard(root, "one"));
    expect(rotated).toEqual({ keyId: 2, retiredKeyIds: [1], resealed: total });
    expect(await sealedKeyUsage(root.kv)).toEqual(new Map([[2, total]]));
    expect(await copyKeyIds(first, members)).toEqual([[2], [2], [2]]);
    for (const member of [first, second, third]) {
      await expectOpens(member.status.client.sub("test"), secrets);
    }

    // Interrupted half-way: the guard disappears (the leader lost its lease)
    // once re-sealing under key 3 has begun.
    const guard = await makeGuard(root, "two");
    const watcher = await root.kv.watch().prefix("namespaced:test/").create();
    let interrupted = false;
    watcher.on("put", (kv) => {
      if (interrupted || sealedKeyId(kv.value) !== 3) return;
      interrupted = true;
      void root.kv.delete().key(guard.key).exec();
    });
    await expect(first.status.rotateSecretsKey(guard)).rejects.toThrow(GuardLostError);
    await watcher.cancel();
    expect(interrupted).toBe(true);
    const mixed = await sealedKeyUsage(root.kv);
    expect([...mixed.keys()].every((id) => id === 2 || id === 3)).toBe(true);
    expect(await copyKeyIds(first, members)).toEqual([
      [2, 3],
      [2, 3],
      [2, 3],
    ]);
    for (const member of [first, second, third]) {
      await expectOpens(member.status.client.sub("test"), secrets);
    }

    // The next rotation finishes the job.
    const finished = await first.status.rotateSecretsKey(await makeGuard(root, "three"));
    expect(finished.keyId).toBe(4);
    expect(finished.retiredKeyIds).toEqual([2, 3]);
    expect(finished.resealed).toBe(total);
    expect(await sealedKeyUsage(root.kv)).toEqual(new Map([[4, total]]));
    expect(await copyKeyIds(first, members)).toEqual([[4], [4], [4]]);

    // Failover: the rotating member is gone; the others open every secret.
    await fixture.stop(first);
    for (const member of [second, third]) {
      await eventually(async () => {
        const sealed = await member.status.client.sub("test").kv.get("secret-0000").buffer();
        return sealed !== null && sealedKeyId(sealed) === 4;
      }, "the keyring rotated to key 4 is loaded");
      await expectOpens(member.status.client.sub("test"), secrets);
    }
    // And so does the etcd CA key, which addNode issues peer certificates with.
    const own = second.status.client.sub("consensus");
    const caKey = await own.kv.get("keys/etcd-ca-privkey.bin").buffer();
    expect(caKey !== null && sealedKeyId(caKey)).toBe(4);
    expect(await own.secrets.open("keys/etcd-ca-privkey.bin", caKey as Buffer)).toHaveLength(32);
  }, 120_000);
});
