/**
 * The control plane launcher without a control plane to run: what it
 * decides from the values, and what it cleans up on a node that is no
 * consensus member (run on MockContext with memory values; the running
 * control plane is tested end to end in packages/cluster).
 */
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "@metropolis/event";
import { CuratorConnection } from "@metropolis/curator";
import { memberDataPath } from "@metropolis/consensus";
import {
  placeNodeRoot,
  sealConfiguration,
  unsealConfiguration,
  type NodeRoot,
} from "@metropolis/localstorage";
import { CertificateAuthority, generateKeyPair, nodeIdFromPublicKey } from "@metropolis/pki";
import { common, priv } from "@metropolis/proto";
import { eventually, MockContext } from "@metropolis/supervisor/testing";
import { controlPlaneWorker } from "../src/controlplane";
import { joinFromRoles, StartupWatcher } from "../src/controlplane-startup";
import { RolesChangedError } from "../src/errors";
import { credentialsPem, type NodeCredentials } from "../src/node-credentials";
import { RoleserveValues } from "../src/values";

let dir: string;
let storage: NodeRoot;
let credentials: NodeCredentials;

beforeAll(async () => {
  const ca = await CertificateAuthority.create();
  const keys = generateKeyPair();
  credentials = {
    nodeId: nodeIdFromPublicKey(keys.publicKey),
    privateKey: keys.privateKey,
    certificate: (await ca.issueNodeCertificate(keys.publicKey)).der,
    caCertificate: ca.certificate.der,
  };
});

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "metropolis-controlplane-"));
  storage = placeNodeRoot(join(dir, "root"));
  await storage.esp.metropolis.mkdirAll();
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A member's values: enrolled, with credentials, the given roles. */
function memberValues(sealed: priv.SealedConfiguration, roles: common.NodeRoles) {
  const values = new RoleserveValues();
  const tls = credentialsPem(credentials);
  values.curatorConnection.set({
    credentials,
    connection: new CuratorConnection({
      endpoints: [{ host: "127.0.0.1", port: 1 }],
      ca: tls.ca,
      identity: tls,
    }),
  });
  values.bootstrapData.set(undefined);
  values.enrolment.set({ sealed, clusterUnlockKey: randomBytes(32) });
  values.localRoles.set(roles);
  return values;
}

/** A member's sealed configuration (with its cluster unlock key), sealed into `storage`. */
async function sealMember(machineKeyPath: string): Promise<priv.SealedConfiguration> {
  const sealed = priv.SealedConfiguration.fromPartial({
    nodeUnlockKey: randomBytes(32),
    joinKey: randomBytes(32),
    clusterCa: Buffer.from(credentials.caCertificate),
    storagePolicy: common.StoragePolicy.ENCRYPTED,
    clusterUnlockKey: randomBytes(32),
  });
  await sealConfiguration(
    storage.esp.metropolis.sealedConfiguration,
    priv.SealedConfiguration.encode(sealed).finish(),
    { machineKeyPath },
  );
  return sealed;
}

describe("controlPlaneWorker", () => {
  it("without the consensus role and without etcd data: publishes no control plane, unseals the CUK, and restarts when the role comes", async () => {
    const machineKeyPath = join(dir, "machine.key");
    const sealed = await sealMember(machineKeyPath);
    const file = storage.esp.metropolis.sealedConfiguration;

    const values = memberValues(sealed, { kubernetesWorker: {} });
    const ctx = new MockContext("root.controlplane");
    const result = controlPlaneWorker(values, { storage, machineKeyPath, host: "127.0.0.1" })(ctx);
    expect(await waitFor(values.localControlPlane, () => true)).toBeUndefined();
    // Healthy once it stood down: the clean-up below is done by then.
    await eventually(() => ctx.state === "healthy", "the launcher to stand down");
    const resealed = priv.SealedConfiguration.decode(
      await unsealConfiguration(file, { machineKeyPath }),
    );
    expect(resealed.clusterUnlockKey.length).toBe(0);
    expect(resealed.nodeUnlockKey.equals(sealed.nodeUnlockKey)).toBe(true);
    expect(resealed.clusterCa.equals(sealed.clusterCa)).toBe(true);
    expect(ctx.children).toEqual([]);

    // A change that keeps the node without the role changes nothing.
    values.localRoles.set({ kubernetesController: {} });
    values.localRoles.set({
      consensusMember: {
        peers: [],
        caCertificate: Buffer.alloc(0),
        peerCertificate: Buffer.alloc(0),
        peerCrl: Buffer.alloc(0),
      },
    });
    const error = await result.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(RolesChangedError);
    expect((error as RolesChangedError).shouldRun).toBe(true);
  });

  /**
   * A member without the consensus role, with `entry` in its etcd member
   * directory: its launcher, on a MockContext, once it stood down, and its
   * sealed configuration then.
   */
  async function standDownOver(entry: "wal" | "snap") {
    const machineKeyPath = join(dir, "machine.key");
    const sealed = await sealMember(machineKeyPath);
    const member = memberDataPath(storage);
    await mkdir(join(member, entry), { recursive: true });
    const values = memberValues(sealed, {});
    const ctx = new MockContext("root.controlplane");
    const result = controlPlaneWorker(values, { storage, machineKeyPath, host: "127.0.0.1" })(ctx);
    stops.push(async () => {
      ctx.abort();
      await result.catch(() => undefined);
    });
    await eventually(() => ctx.state === "healthy", "the launcher to stand down");
    const resealed = priv.SealedConfiguration.decode(
      await unsealConfiguration(storage.esp.metropolis.sealedConfiguration, { machineKeyPath }),
    );
    return { sealed, member, values, ctx, resealed };
  }
  const stops: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const stop of stops.splice(0)) await stop();
  });

  // Issue 11: a curator's answer "no roles" made members wipe their etcd data.
  it("never removes etcd data or the CUK on the roles' word: it starts the member from its data for etcd to decide", async () => {
    // A member etcd has started: its write-ahead log (member-data.ts in consensus).
    const { sealed, member, values, ctx, resealed } = await standDownOver("wal");
    expect(await waitFor(values.localControlPlane, () => true)).toBeUndefined();
    // The member is started from its data (MockContext does not run it: etcd never answers).
    expect(ctx.children.map((c) => c.name)).toEqual(["consensus"]);
    await expect(stat(member)).resolves.toBeDefined();
    expect(resealed.clusterUnlockKey.equals(sealed.clusterUnlockKey)).toBe(true);
  });

  // What etcd leaves of a join it gave up (consensus member-data.ts): no member's data.
  it("takes a member directory without etcd's write-ahead log for no member: removes it and drops the CUK", async () => {
    const { member, ctx, resealed } = await standDownOver("snap");
    expect(ctx.children).toEqual([]);
    await expect(stat(member)).rejects.toThrow(/ENOENT/);
    expect(resealed.clusterUnlockKey.length).toBe(0);
  });
});

describe("StartupWatcher", () => {
  it("bootstraps only until the bootstrap finished; then it follows the roles like any node", async () => {
    const values = new RoleserveValues();
    const sealed = priv.SealedConfiguration.fromPartial({
      storagePolicy: common.StoragePolicy.ENCRYPTED,
    });
    const bootstrap = {
      nodePrivateKey: randomBytes(32),
      joinPublicKey: randomBytes(32),
      ownerPublicKey: randomBytes(32),
      labels: new Map(),
    };
    values.bootstrapData.set(bootstrap);
    values.enrolment.set({ sealed, clusterUnlockKey: randomBytes(32) });
    const signal = new AbortController().signal;
    const first = new StartupWatcher(values);
    expect(await first.next(signal)).toMatchObject({ run: true, bootstrap });
    first.close();

    // What the control plane does when the bootstrap finished; later the
    // cluster takes the consensus role away from this first node.
    const tls = credentialsPem(credentials);
    values.curatorConnection.set({
      credentials,
      connection: new CuratorConnection({
        endpoints: [{ host: "127.0.0.1", port: 1 }],
        ca: tls.ca,
        identity: tls,
      }),
    });
    values.bootstrapData.set(undefined);
    values.localRoles.set({ kubernetesController: {} });
    const later = new StartupWatcher(values);
    expect(await later.next(signal)).toEqual({ run: false, credentials });
    later.close();
  });
});

describe("joinFromRoles", () => {
  it("gives join data only when the role carries peers", () => {
    expect(joinFromRoles({})).toBeUndefined();
    expect(
      joinFromRoles({
        consensusMember: {
          peers: [],
          caCertificate: Buffer.alloc(0),
          peerCertificate: Buffer.alloc(0),
          peerCrl: Buffer.alloc(0),
        },
      }),
    ).toBeUndefined();
    const join = joinFromRoles({
      consensusMember: {
        peers: [{ name: "metropolis-a", peerUrl: "https://127.0.0.2:7834" }],
        caCertificate: Buffer.from([1]),
        peerCertificate: Buffer.from([2]),
        peerCrl: Buffer.from([3]),
      },
    });
    expect(join).toEqual({
      peers: [{ name: "metropolis-a", peerUrl: "https://127.0.0.2:7834" }],
      caCertificate: Buffer.from([1]),
      certificate: Buffer.from([2]),
      crl: Buffer.from([3]),
    });
  });
});
