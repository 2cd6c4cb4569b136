/**
 * The control plane launcher standing down on a real etcd member (issue 11:
 * irreversible steps need proof). A node whose roles say "no consensus"
 * while etcd still counts it as a member keeps its data and its sealed
 * cluster unlock key, and runs its member; once its cluster removes the
 * member — and etcd says so — the data and the key go.
 */
import { randomBytes } from "node:crypto";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { CuratorConnection } from "@metropolis/curator";
import { localTimings, memberDataPath } from "@metropolis/consensus";
import {
  diesWithEtcd,
  runTestMember,
  testNode,
  type TestNode,
} from "@metropolis/consensus/testing";
import { sealConfiguration, unsealConfiguration } from "@metropolis/localstorage";
import { CertificateAuthority } from "@metropolis/pki";
import { common, priv } from "@metropolis/proto";
import { eventually, testHarness } from "@metropolis/supervisor/testing";
import { controlPlaneWorker } from "../src/controlplane";
import { credentialsPem, type NodeCredentials } from "../src/node-credentials";
import { RoleserveValues } from "../src/values";

const nodes: TestNode[] = [];
afterAll(async () => {
  for (const n of nodes) await n.remove();
});

it("keeps a member's data and unlock key until etcd itself reports the member removed", async () => {
  const [a, b] = [await testNode("standdown-a"), await testNode("standdown-b")];
  nodes.push(a, b);
  const first = await runTestMember(a, { bootstrap: true });
  try {
    // b becomes a voting member, then its process stops (the node restarts).
    const joinData = await first.status.addNode(b.nodeId, b.publicKey, b.peer);
    const joined = await runTestMember(b, { join: joinData });
    await eventually(
      async () => (await first.status.members()).every((m) => !m.isLearner && m.name !== ""),
      "b promoted",
    );
    await joined.harness.cleanup({ timeoutMs: 20_000 });

    // b comes back believing it has no roles.
    const ca = await CertificateAuthority.create();
    const credentials: NodeCredentials = {
      nodeId: b.nodeId,
      privateKey: b.privateKey,
      certificate: (await ca.issueNodeCertificate(b.publicKey)).der,
      caCertificate: ca.certificate.der,
    };
    const machineKeyPath = join(b.dir, "machine.key");
    const sealed = priv.SealedConfiguration.fromPartial({
      nodeUnlockKey: randomBytes(32),
      joinKey: randomBytes(32),
      clusterCa: Buffer.from(credentials.caCertificate),
      storagePolicy: common.StoragePolicy.ENCRYPTED,
      clusterUnlockKey: randomBytes(32),
    });
    const sealedFile = b.storage.esp.metropolis.sealedConfiguration;
    await b.storage.esp.metropolis.mkdirAll();
    await sealConfiguration(sealedFile, priv.SealedConfiguration.encode(sealed).finish(), {
      machineKeyPath,
    });
    const unlockKeySealed = async () =>
      priv.SealedConfiguration.decode(await unsealConfiguration(sealedFile, { machineKeyPath }))
        .clusterUnlockKey.length > 0;
    const tls = credentialsPem(credentials);
    const connection = new CuratorConnection({
      endpoints: [{ host: "127.0.0.1", port: 1 }],
      ca: tls.ca,
      identity: tls,
    });
    const values = new RoleserveValues();
    values.curatorConnection.set({ credentials, connection });
    values.bootstrapData.set(undefined);
    values.enrolment.set({ sealed, clusterUnlockKey: sealed.clusterUnlockKey });
    values.localRoles.set({});

    const member = memberDataPath(b.storage);
    const harness = testHarness(
      async (ctx) => {
        ctx.run(
          "controlplane",
          controlPlaneWorker(values, {
            storage: b.storage,
            machineKeyPath,
            host: b.peer.host,
            consensusPort: b.peer.port,
            timings: localTimings,
          }),
        );
        ctx.healthy();
        await ctx.untilAborted();
      },
      // etcd exits once it reports the removal; the service does not start it
      // again. The followers reading it (keyring, peer CRL) may fail meanwhile.
      { expectDeath: (dn) => diesWithEtcd(dn, "root.controlplane.consensus") },
    );
    try {
      await harness.waitFor("root.controlplane", "healthy");
      // etcd counts b as a member: it runs, and keeps everything.
      await eventually(
        () =>
          harness.supervisor
            .logs("root.controlplane")
            .some((l) => l.message.includes("etcd still counts this node as a member")),
        "b's member confirmed by etcd",
      );
      expect((await first.status.members()).map((m) => m.name)).toContain(b.nodeId);
      await expect(stat(member)).resolves.toBeDefined();
      expect(await unlockKeySealed()).toBe(true);

      // Its cluster removes it: etcd says so, and only now the data and the key go.
      expect(await first.status.removeNode(b.nodeId)).toBe(true);
      await eventually(
        async () =>
          !(await stat(member).then(
            () => true,
            () => false,
          )),
        "b's etcd data removed",
      );
      await eventually(async () => !(await unlockKeySealed()), "b's unlock key unsealed");
      expect(harness.supervisor.logs("root.controlplane").map((l) => l.message)).toContain(
        "etcd reported this member's removal from the cluster: removed its etcd data",
      );
    } finally {
      await harness.cleanup({ timeoutMs: 20_000 });
      connection.close();
    }
  } finally {
    await first.harness.cleanup({ timeoutMs: 20_000 });
  }
}, 90_000);
