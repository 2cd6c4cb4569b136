/**
 * The authorization matrix of the node's own services, Debug and
 * NodeManagement (served together): every method of both
 * (enumerated from the generated definitions) called as every kind
 * of caller of the curator's matrix (authz-table.ts of @metropolis/curator/testing),
 * against a real Debug server over real mutual TLS with certificates of a
 * throwaway cluster CA. The node README shows the same table (checked here;
 * `METROPOLIS_WRITE_AUTHZ_README=1` rewrites it).
 *
 * The Debug service is served by every node, leader or not, and knows no
 * node records: a "deleted node" is a node certificate of the cluster CA that
 * it cannot tell from a current one until certificates are revoked (issue 11).
 */
import { join } from "node:path";
import { Client, Server } from "@grpc/grpc-js";
import { freePort } from "@metropolis/consensus/testing";
import {
  curatorClientCredentials,
  curatorServerCredentials,
  identifier,
  ownerCommonName,
  Revocations,
} from "@metropolis/curator";
import {
  accessTemplate,
  CertificateAuthority,
  createEphemeralCertificate,
  generateKeyPair,
  nodeIdFromPublicKey,
  nodeTemplate,
  selfSignCertificate,
  tlsMaterial,
  userTemplate,
  type ParsedCertificate,
} from "@metropolis/pki";
import { api } from "@metropolis/proto";
import { testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import {
  certified,
  identities,
  readmeTables,
  withAccessRoles,
  type Identity,
  type Table,
  codeName,
  grpcMethods,
  invoke,
} from "@metropolis/curator/testing";
import { debugServer, nodeStreams } from "../src/debug-service";
import { nodeManagementServer } from "../src/node-management";

/**
 * Expected outcome per method and caller. Only the cluster's nodes, its
 * owner, and the scoped credentials whose role the curator's access-roles.ts
 * lets call a method (withAccessRoles) may look inside a node. Change a cell
 * by overriding it in its row.
 */
const nodeOrOwner = certified({ node: "OK", owner: "OK" });
/** NodeManagement: the owner only; a node certificate of the cluster is PERMISSION_DENIED. */
const ownerOnly = certified({ node: "PERMISSION_DENIED", owner: "OK" });
/**
 * DefragmentMember: the owner only; this server runs no etcd member, so the
 * owner's call, once authorized, is refused FAILED_PRECONDITION (the
 * defragmentation itself: node-management.test.ts, with a real member).
 */
const ownerOnlyNoMember = certified({ node: "PERMISSION_DENIED", owner: "FAILED_PRECONDITION" });
const expected: Table = Object.fromEntries(
  Object.entries({
    "Debug.GetCondition": nodeOrOwner,
    "Debug.GetLogs": nodeOrOwner,
    "Debug.GetSupervisionTree": nodeOrOwner,
    "Debug.GetSupervisorReports": nodeOrOwner,
    "Debug.WatchSupervisionTree": nodeOrOwner,
    "NodeManagement.DefragmentMember": ownerOnlyNoMember,
    "NodeManagement.Logs": ownerOnly,
    "NodeManagement.PowerOff": ownerOnly,
    "NodeManagement.Reboot": ownerOnly,
  }).map(([key, row]) => [key, withAccessRoles(key, row)]),
);

/** A request per method that succeeds when its caller is authorized. */
const requests: Record<string, unknown> = {
  "Debug.GetCondition": { condition: api.Condition.STORAGE_MOUNTED },
  "Debug.GetLogs": { dnPrefix: "", follow: false },
  "Debug.GetSupervisionTree": {},
  "Debug.GetSupervisorReports": { dnPrefix: "", follow: true },
  "Debug.WatchSupervisionTree": {},
  "NodeManagement.Logs": api.LogsRequest.fromPartial({
    streamMode: api.LogsRequest_StreamMode.STREAM,
  }),
  "NodeManagement.DefragmentMember": {},
  "NodeManagement.PowerOff": {},
  "NodeManagement.Reboot": {},
};

const debugMethods = grpcMethods().filter(
  (m) => m.service === "Debug" || m.service === "NodeManagement",
);
/** What Reboot and PowerOff asked for (the owner's calls, once each). */
const powered: string[] = [];

describe("the Debug and NodeManagement authorization table", () => {
  it("has a row and a request for every Debug and NodeManagement method, and none for methods that do not exist", () => {
    const keys = debugMethods.map((m) => m.key);
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.filter((k) => expected[k] === undefined || !(k in requests))).toEqual([]);
    expect(Object.keys(expected).filter((k) => !keys.includes(k))).toEqual([]);
  });

  it("is the one the node README shows", () => {
    const { debug } = readmeTables(join(__dirname, "..", "README.md"), { debug: expected });
    expect(debug.shown).toEqual(debug.expected);
  });
});

let harness: TestHarness;
let server: Server;
let address: string;
let caPem: string;
let tls: Record<Exclude<Identity, "none">, { cert: string; key: string }>;

beforeAll(async () => {
  const ca = await CertificateAuthority.create();
  const foreignCa = await CertificateAuthority.create();
  caPem = ca.certificate.toPem();
  const keys = () => generateKeyPair();
  const self = keys();
  const node = keys();
  const deleted = keys();
  const owner = keys();
  const attacker = keys();
  const ephemeral = keys();
  const person = keys();
  const scoped = async (role: string, validity: { notBefore?: Date; notAfter: Date }) =>
    pem(
      await ca.issue(accessTemplate(`${role}-1`, role), person.publicKey, validity),
      person.privateKey,
      ca.certificate,
    );
  const day = new Date(Date.now() + 24 * 3600_000);
  const pem = (
    certificate: ParsedCertificate,
    privateKey: Uint8Array,
    issuer: ParsedCertificate = certificate,
  ) => tlsMaterial({ certificate, privateKey, ca: issuer });
  const deletedCertificate = await ca.issueNodeCertificate(deleted.publicKey);
  const revocations = new Revocations(ca.certificate.der);
  await revocations.offer((await ca.revoke(await ca.createCrl(), deletedCertificate.serial)).der);
  const claimingNode = {
    ...nodeTemplate(),
    subject: { commonName: nodeIdFromPublicKey(node.publicKey) },
  };
  tls = {
    "self-signed node": pem(
      await selfSignCertificate(claimingNode, attacker.privateKey),
      attacker.privateKey,
    ),
    "self-signed owner": pem(
      await selfSignCertificate(userTemplate(ownerCommonName), attacker.privateKey),
      attacker.privateKey,
    ),
    "foreign node": pem(
      await foreignCa.issue(claimingNode, attacker.publicKey),
      attacker.privateKey,
      foreignCa.certificate,
    ),
    "foreign owner": pem(
      await foreignCa.issueUserCertificate(ownerCommonName, attacker.publicKey),
      attacker.privateKey,
      foreignCa.certificate,
    ),
    ephemeral: pem(await createEphemeralCertificate(ephemeral.privateKey), ephemeral.privateKey),
    node: pem(await ca.issueNodeCertificate(node.publicKey), node.privateKey, ca.certificate),
    "deleted node": pem(deletedCertificate, deleted.privateKey, ca.certificate),
    owner: pem(
      await ca.issueUserCertificate(ownerCommonName, owner.publicKey),
      owner.privateKey,
      ca.certificate,
    ),
    reader: await scoped("reader", { notAfter: day }),
    operator: await scoped("operator", { notAfter: day }),
    backup: await scoped("backup", { notAfter: day }),
    // Expired an hour ago.
    expired: await scoped("reader", {
      notBefore: new Date(Date.now() - 2 * 3600_000),
      notAfter: new Date(Date.now() - 3600_000),
    }),
  };

  harness = testHarness(async (ctx) => {
    ctx.logger.info("a line for GetLogs");
    ctx.healthy();
    await ctx.untilAborted();
  });
  await harness.waitFor("root", "healthy");
  // As node-tree.ts serves it.
  server = new Server();
  const identify = identifier(ca.certificate.der, revocations);
  const streams = nodeStreams();
  server.addService(
    api.DebugService,
    debugServer({
      supervisor: harness.supervisor,
      conditions: () => ({ ok: true }),
      identify,
      followStreams: streams,
    }),
  );
  server.addService(
    api.NodeManagementService,
    nodeManagementServer({
      supervisor: harness.supervisor,
      identify,
      streams,
      power: (action) => powered.push(action),
      etcdSocket: () => undefined,
    }),
  );
  const port = await freePort("127.0.0.1");
  const serverTls = pem(
    await ca.issueNodeCertificate(self.publicKey),
    self.privateKey,
    ca.certificate,
  );
  await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${port}`, curatorServerCredentials(serverTls), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  address = `127.0.0.1:${port}`;
});

afterAll(async () => {
  server?.forceShutdown();
  await harness?.cleanup();
});

it.each(debugMethods.map((m) => [m.key, m] as const))(
  "%s answers each caller as the table says",
  async (key, m) => {
    const actual: Partial<Record<Identity, string>> = {};
    for (const identity of identities) {
      const client = new Client(
        address,
        curatorClientCredentials(caPem, identity === "none" ? undefined : tls[identity]),
      );
      try {
        actual[identity] = codeName(await invoke(client, m, requests[key], { deadlineMs: 10_000 }));
      } finally {
        client.close();
      }
    }
    expect(actual).toEqual(expected[key]);
  },
);

it("the owner's Reboot and PowerOff and the operator's Reboot (and no one else's) reached the node", () => {
  // The matrix ran each method once per caller; only the owner's and the operator's calls passed.
  expect(powered.sort()).toEqual(["poweroff", "reboot", "reboot"]);
});
