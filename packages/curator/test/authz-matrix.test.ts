/**
 * The authorization matrix: every method of every gRPC service (enumerated
 * from the generated definitions in @metropolis/proto, so that a new RPC
 * cannot be forgotten) called as every kind of caller, on the leading curator
 * and on a following one, against real etcd over real mTLS.
 *
 * The expected outcome of each cell is data in {@link expected} below; the
 * curator README shows the same tables (checked here, so the two cannot
 * drift; `METROPOLIS_WRITE_AUTHZ_README=1` rewrites them there after a change
 * of the table). Each call of a method carries a request that succeeds when
 * its caller is authorized (a valid ticket, the caller's own node, a
 * throwaway target node, …), so "OK" and "refused" are told apart; and no
 * refused call may change anything in etcd.
 *
 * The Debug service is served by every node, not by the curator: its matrix
 * is in packages/node/test/debug-authz.test.ts.
 */
import { eventually } from "@metropolis/supervisor/testing";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { Client, status } from "@grpc/grpc-js";
import {
  CertificateAuthority,
  nodeTemplate,
  parseCertificate,
  selfSignCertificate,
  tlsMaterial,
  userTemplate,
} from "@metropolis/pki";
import { access, api, common, protocolVersion } from "@metropolis/proto";
import { ownerCommonName } from "../src/identity";
import {
  newKeys,
  startCurators,
  unary,
  type CuratorsFixture,
  type RunningCurator,
  type Tls,
  type UpNode,
} from "./curators-fixture";
import {
  certified,
  everyone,
  identities,
  readmeTables,
  type Identity,
  type Row,
  type Table,
  codeName,
  grpcMethods,
  invoke,
  type GrpcMethod,
  withAccessRoles,
} from "@metropolis/curator/testing";

// ── The expected table ─────────────────────────────────────────────────────

const nodeOnly = certified({ node: "OK" });
const ephemeralOnly = certified({ ephemeral: "OK" });
const ownerOnly = certified({ owner: "OK" });

/**
 * Expected outcome per method and caller, on the leader and on a follower
 * (the scoped credentials' cells of a leader's row come from access-roles.ts:
 * see {@link expected}, which applies withAccessRoles).
 * A follower serves CuratorLocal only: everything else is UNAVAILABLE there ("not the leader"),
 * whoever calls. Change a cell by overriding it in its row.
 */
const asWritten: Record<string, { leader: Row; follower: Row }> = {
  "Access.IssueAccess": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Access.ListAccess": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Access.RevokeAccess": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "AAA.Escrow": { leader: ephemeralOnly, follower: everyone("UNAVAILABLE") },
  "Curator.CommitNode": { leader: ephemeralOnly, follower: everyone("UNAVAILABLE") },
  "Curator.GetConsensusStatus": { leader: nodeOnly, follower: everyone("UNAVAILABLE") },
  "Curator.Heartbeat": { leader: nodeOnly, follower: everyone("UNAVAILABLE") },
  "Curator.JoinNode": { leader: ephemeralOnly, follower: everyone("UNAVAILABLE") },
  "Curator.RegisterNode": { leader: ephemeralOnly, follower: everyone("UNAVAILABLE") },
  "Curator.UpdateNodeStatus": { leader: nodeOnly, follower: everyone("UNAVAILABLE") },
  "Curator.Watch": { leader: nodeOnly, follower: everyone("UNAVAILABLE") },
  "Curator.WatchRevocations": { leader: nodeOnly, follower: everyone("UNAVAILABLE") },
  "CuratorLocal.GetCACertificate": { leader: everyone("OK"), follower: everyone("OK") },
  "CuratorLocal.GetCurrentLeader": { leader: everyone("OK"), follower: everyone("OK") },
  "Management.ApproveNode": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.ConfigureCluster": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.DeleteNode": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.GetClusterConsensus": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.GetClusterInfo": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.GetNodes": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.GetRegisterTicket": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.RotateClusterSecretsKey": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.UpdateNodeLabels": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.UpdateNodeRoles": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.WatchClusterConsensus": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.WatchNodes": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.CheckNodeMaintenance": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.DecommissionNode": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  // The owner's probe names a member etcd does not have: removing a real one could end the cluster.
  "Management.RemoveConsensusMember": {
    leader: certified({ owner: "NOT_FOUND" }),
    follower: everyone("UNAVAILABLE"),
  },
  "Management.MoveConsensusLeader": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.DefragmentConsensus": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.GetConsensusAlarms": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.GetClusterHealth": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.DisarmConsensusAlarm": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
  "Management.BackupCluster": { leader: ownerOnly, follower: everyone("UNAVAILABLE") },
};

/** The table: {@link asWritten}, each leader row with the roles of access-roles.ts. */
const expected: Record<string, { leader: Row; follower: Row }> = Object.fromEntries(
  Object.entries(asWritten).map(([key, { leader, follower }]) => [
    key,
    { leader: withAccessRoles(key, leader), follower },
  ]),
);

/** Services whose matrix lives in another package's tests (they are not served by the curator). */
const coveredElsewhere: Record<string, string> = {
  Debug: "packages/node/test/debug-authz.test.ts",
  NodeManagement: "packages/node/test/debug-authz.test.ts",
};

// ── The README's copy ──────────────────────────────────────────────────────

const repositoryRoot = join(__dirname, "..", "..", "..");

/** The table of `role`, as the README shows it. */
const tableOf = (role: "leader" | "follower"): Table =>
  Object.fromEntries(Object.entries(expected).map(([key, rows]) => [key, rows[role]]));

describe("the authorization table", () => {
  const methods = grpcMethods();

  it("has a row for every method the curator serves, and none for methods that do not exist", () => {
    const served = methods
      .filter((m) => coveredElsewhere[m.service] === undefined)
      .map((m) => m.key);
    expect(served.filter((key) => expected[key] === undefined)).toEqual([]);
    expect(Object.keys(expected).filter((key) => !served.includes(key))).toEqual([]);
    // Every other service is covered where the table says.
    for (const [service, file] of Object.entries(coveredElsewhere)) {
      expect(methods.some((m) => m.service === service)).toBe(true);
      expect(existsSync(join(repositoryRoot, file))).toBe(true);
    }
  });

  it("is the one the curator README shows", () => {
    const tables = readmeTables(join(__dirname, "..", "README.md"), {
      leader: tableOf("leader"),
      follower: tableOf("follower"),
    });
    for (const { shown, expected: cells } of Object.values(tables)) expect(shown).toEqual(cells);
  });
});

// ── The calls ──────────────────────────────────────────────────────────────

const deadlineMs = 10_000;

let cluster: CuratorsFixture;
/** The "node" caller. */
let node: UpNode;
/** The "deleted node" caller. */
let deleted: UpNode;
/** Certificates of the callers that do not depend on the method. */
let fixedTls: Partial<Record<Identity, Tls>>;

beforeAll(async () => {
  cluster = await startCurators();
  node = await cluster.addUpNode();
  deleted = await cluster.addUpNode();
  await cluster.deleteNode(deleted.nodeId);

  const foreignCa = await CertificateAuthority.create();
  const attacker = newKeys();
  // A node certificate's CN is its own key's node ID; these claim another's.
  const claimingNode = { ...nodeTemplate(), subject: { commonName: node.nodeId } };
  const selfSigned = async (template: Parameters<typeof selfSignCertificate>[0]) => {
    const certificate = await selfSignCertificate(template, attacker.privateKey);
    return tlsMaterial({ certificate, privateKey: attacker.privateKey, ca: certificate });
  };
  const foreign = async (certificate: Awaited<ReturnType<CertificateAuthority["issue"]>>) =>
    tlsMaterial({ certificate, privateKey: attacker.privateKey, ca: foreignCa.certificate });
  fixedTls = {
    "self-signed node": await selfSigned(claimingNode),
    "self-signed owner": await selfSigned(userTemplate(ownerCommonName)),
    "foreign node": await foreign(await foreignCa.issue(claimingNode, attacker.publicKey)),
    "foreign owner": await foreign(
      await foreignCa.issueUserCertificate(ownerCommonName, attacker.publicKey),
    ),
    node: node.tls,
    "deleted node": deleted.tls,
    owner: cluster.owner.tls,
    reader: await issueScoped("reader", access.AccessRole.READER, 3600),
    operator: await issueScoped("operator", access.AccessRole.OPERATOR, 3600),
    backup: await issueScoped("backup", access.AccessRole.BACKUP, 3600),
    expired: await expiredScoped(),
  };
}, 120_000);

/** A scoped credential the owner issued through Access.IssueAccess, with its certificate's notAfter. */
async function issueScopedWithExpiry(
  name: string,
  role: access.AccessRole,
  ttlSeconds: number,
): Promise<{ tls: Tls; notAfter: number; serial: string }> {
  const keys = newKeys();
  const client = cluster.client(access.AccessClient, cluster.leader.address, cluster.owner.tls);
  const issued = await unary<access.IssueAccessResponse>((cb) =>
    client.issueAccess({ name, role, publicKey: keys.publicKey, ttlSeconds }, cb),
  );
  const certificate = parseCertificate(issued.certificate);
  return {
    tls: tlsMaterial({
      certificate,
      privateKey: keys.privateKey,
      ca: parseCertificate(issued.caCertificate),
    }),
    notAfter: certificate.notAfter.getTime(),
    serial: issued.credential?.serial ?? "",
  };
}

async function issueScoped(
  name: string,
  role: access.AccessRole,
  ttlSeconds: number,
): Promise<Tls> {
  return (await issueScopedWithExpiry(name, role, ttlSeconds)).tls;
}

/** A reader credential issued for one second, once it has expired. */
async function expiredScoped(): Promise<Tls> {
  const { tls, notAfter } = await issueScopedWithExpiry("expired", access.AccessRole.READER, 1);
  // Time is the condition here: the clock past its notAfter (a certificate's wall-clock time).
  await eventually(() => Date.now() > notAfter, "the scoped credential expired", {
    timeoutMs: 10_000,
    intervalMs: 100,
  });
  return tls;
}

afterAll(async () => {
  await cluster?.stop();
});

/** What one call sends: its request, and the key an ephemeral caller presents (default: a fresh one). */
interface Prepared {
  request: unknown;
  ephemeralKey?: Buffer;
}

/**
 * For each method, a request that succeeds when its caller is authorized,
 * made fresh for each call (`identity` is who will call).
 */
const requests: Record<string, (identity: Identity) => Promise<Prepared>> = {
  "Access.IssueAccess": async () => ({
    request: {
      name: "authz-probe",
      role: access.AccessRole.READER,
      publicKey: newKeys().publicKey,
      ttlSeconds: 60,
    },
  }),
  "Access.ListAccess": async () => ({ request: {} }),
  // A credential issued for the call to revoke.
  "Access.RevokeAccess": async () => ({
    request: {
      target: {
        $case: "serial",
        serial: (await issueScopedWithExpiry("revoked", access.AccessRole.READER, 60)).serial,
      },
    },
  }),
  "AAA.Escrow": async () => ({
    request: { publicKey: cluster.owner.keys.publicKey },
    ephemeralKey: cluster.owner.keys.privateKey,
  }),
  "Curator.CommitNode": async () => {
    const registered = await cluster.registerNode();
    await cluster.approve(registered.nodeId);
    return {
      request: { clusterUnlockKey: randomBytes(32) },
      ephemeralKey: registered.keys.privateKey,
    };
  },
  "Curator.GetConsensusStatus": async () => ({ request: {} }),
  "Curator.Heartbeat": async () => ({ request: {} }),
  "Curator.JoinNode": async () => ({
    request: { protocolVersion },
    ephemeralKey: node.join.privateKey,
  }),
  "Curator.RegisterNode": async () => ({
    request: {
      registerTicket: cluster.ticket,
      joinKey: newKeys().publicKey,
      labels: new Map(),
      protocolVersion,
    },
  }),
  "Curator.UpdateNodeStatus": async (identity) => ({
    request: {
      nodeId: identity === "deleted node" ? deleted.nodeId : node.nodeId,
      status: common.NodeStatus.fromPartial({
        externalAddress: `10.${randomBytes(3).join(".")}`,
        version: "authz",
      }),
    },
  }),
  "Curator.Watch": async (identity) => ({
    request: {
      kind: {
        $case: "nodeInCluster",
        nodeInCluster: { nodeId: identity === "deleted node" ? deleted.nodeId : node.nodeId },
      },
    },
  }),
  "Curator.WatchRevocations": async () => ({ request: {} }),
  "CuratorLocal.GetCACertificate": async () => ({ request: {} }),
  "CuratorLocal.GetCurrentLeader": async () => ({ request: {} }),
  "Management.ApproveNode": async () => ({
    request: { node: { $case: "id", id: (await cluster.registerNode()).nodeId } },
  }),
  // An empty mask: the owner's call reads the configuration and changes nothing.
  "Management.ConfigureCluster": async () => ({ request: {} }),
  "Management.DeleteNode": async () => ({
    request: { node: { $case: "id", id: (await cluster.registerNode()).nodeId } },
  }),
  "Management.GetClusterConsensus": async () => ({ request: {} }),
  "Management.GetClusterInfo": async () => ({ request: {} }),
  "Management.GetNodes": async () => ({ request: { states: [], roles: [], labels: new Map() } }),
  "Management.GetRegisterTicket": async () => ({ request: {} }),
  "Management.RotateClusterSecretsKey": async () => ({ request: {} }),
  "Management.UpdateNodeLabels": async () => ({
    request: {
      node: { $case: "id", id: node.nodeId },
      add: new Map([["authz-probe", randomBytes(4).toString("hex")]]),
      remove: [],
    },
  }),
  "Management.WatchClusterConsensus": async () => ({ request: {} }),
  "Management.WatchNodes": async () => ({ request: {} }),
  "Management.UpdateNodeRoles": async () => ({
    request: {
      node: { $case: "id", id: (await cluster.addUpNode()).nodeId },
      kubernetesWorker: true,
    },
  }),
  // A node without an etcd member: the consensus does not depend on it.
  "Management.CheckNodeMaintenance": async () => ({
    request: { node: { $case: "id", id: node.nodeId }, action: api.NodeMaintenance.REBOOT },
  }),
  "Management.DecommissionNode": async () => ({
    request: { node: { $case: "id", id: (await cluster.addUpNode()).nodeId } },
  }),
  "Management.RemoveConsensusMember": async () => ({
    request: { memberId: "ffffffffffffffff" },
  }),
  // The fixture's one etcd member leads raft: moving it to itself changes nothing.
  "Management.MoveConsensusLeader": async () => ({
    request: { nodeId: cluster.firstNode.nodeId },
  }),
  // Forced: the fixture's one voter cannot be away without losing quorum.
  "Management.DefragmentConsensus": async () => ({ request: { force: true } }),
  "Management.GetConsensusAlarms": async () => ({ request: {} }),
  // The owner gets the whole (small) snapshot of the fixture's etcd.
  "Management.BackupCluster": async () => ({ request: {} }),
  "Management.GetClusterHealth": async () => ({ request: {} }),
  // No alarm is raised: disarming every alarm of the member disarms none.
  "Management.DisarmConsensusAlarm": async () => ({
    request: {
      memberId: (await cluster.member.status.raftStatus()).memberId,
      alarm: api.ConsensusAlarmType.NONE,
    },
  }),
};

/** Calls `m` on `on` as `identity`, with a request prepared for it; checks a refusal changed nothing. */
async function callAs(on: RunningCurator, m: GrpcMethod, identity: Identity): Promise<string> {
  const prepare = requests[m.key];
  if (prepare === undefined) throw new Error(`no request for ${m.key}: add one to \`requests\``);
  const { request, ephemeralKey } = await prepare(identity);
  const tls =
    identity === "none"
      ? undefined
      : identity === "ephemeral"
        ? await cluster.ephemeralTls(ephemeralKey ?? newKeys().privateKey)
        : fixedTls[identity];
  const client = new Client(on.address, cluster.credentials(tls));
  try {
    const before = await cluster.revision();
    const outcome = await invoke(client, m, request, { deadlineMs });
    if (outcome.code !== status.OK) {
      // A refused call wrote nothing: etcd's revision moves with every write.
      expect({ method: m.key, identity, revision: await cluster.revision() }).toEqual({
        method: m.key,
        identity,
        revision: before,
      });
    }
    return codeName(outcome);
  } finally {
    client.close();
  }
}

describe.each(["leader", "follower"] as const)("on the %s", (role) => {
  const methods = grpcMethods().filter((m) => coveredElsewhere[m.service] === undefined);

  it.each(methods.map((m) => [m.key, m] as const))(
    "%s answers each caller as the table says",
    async (key, m) => {
      const row = expected[key];
      if (row === undefined) throw new Error(`no expected row for ${key}: add one to \`expected\``);
      const on = role === "leader" ? cluster.leader : cluster.follower;
      if (on === undefined) throw new Error(`the fixture has no ${role}`);
      const actual: Partial<Record<Identity, string>> = {};
      for (const identity of identities) actual[identity] = await callAs(on, m, identity);
      expect(actual).toEqual(row[role]);
    },
    60_000,
  );
});
