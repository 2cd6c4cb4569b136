/**
 * The revocation worker against a real curator: a node learns that another
 * node's certificate was revoked (the owner deleted it), keeps the CRL on
 * disk, and after a restart refuses that certificate before any curator
 * answers.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CuratorConnection } from "@metropolis/curator";
import { waitFor } from "@metropolis/event";
import { dir, file, place } from "@metropolis/localstorage";
import { parseCertificate, parseCrl } from "@metropolis/pki";
import { eventually, startOnMock } from "@metropolis/supervisor/testing";
import { credentialsPem } from "../src/node-credentials";
import { revocationWorker } from "../src/revocation";
import { RoleserveValues } from "../src/values";
import { startTestCluster, type TestCluster } from "./curator-fixture";

let cluster: TestCluster;
let tmp: string;
beforeAll(async () => {
  cluster = await startTestCluster();
  tmp = await mkdtemp(join(tmpdir(), "roleserve-revocation-"));
});
afterAll(async () => {
  await cluster?.stop();
  await rm(tmp, { recursive: true, force: true });
});

it("follows the cluster's revocations, keeps them on disk, and has them at once after a restart", async () => {
  const root = place(dir({ node: dir({ revocations: file("cluster_crl.der") }) }), tmp);
  await root.mkdirAll();
  const crlFile = root.node.revocations;
  const watcher = await cluster.addNode();
  const doomed = await cluster.addNode();
  const serial = parseCertificate(doomed.certificate).serial;

  const values = new RoleserveValues();
  values.curatorConnection.set(cluster.connect(watcher));
  const run = startOnMock("root.revocation", revocationWorker(values, { file: crlFile }));
  try {
    const revocations = await waitFor(values.revocations, () => true);
    await eventually(() => run.ctx.state === "healthy", "the first CRL taken");
    expect(revocations.isRevoked(serial)).toBe(false);

    await cluster.deleteNode(doomed.nodeId);
    await eventually(() => revocations.isRevoked(serial), "the deleted node's certificate revoked");
    await eventually(
      async () => (await crlFile.exists()) && parseCrl(await crlFile.read()).isRevoked(serial),
      "the CRL on disk",
    );
  } finally {
    await run.stop();
  }

  // Restarted, with no curator to ask: the copy on disk is in force at once.
  const unreachable = new CuratorConnection({
    endpoints: [{ host: "127.0.0.1", port: 1, nodeId: cluster.firstNode.nodeId }],
    ca: cluster.caPem,
    identity: credentialsPem(watcher),
  });
  const later = new RoleserveValues();
  later.curatorConnection.set({ credentials: watcher, connection: unreachable });
  const restarted = startOnMock("root.revocation", revocationWorker(later, { file: crlFile }));
  try {
    const revocations = await waitFor(later.revocations, () => true);
    expect(revocations.isRevoked(serial)).toBe(true);
    expect(restarted.ctx.state).toBe("new");
  } finally {
    await restarted.stop();
    unreachable.close();
  }
});
