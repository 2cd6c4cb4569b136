/**
 * The mTLS metrics server against real TLS with certificates of a throwaway
 * cluster CA: who gets in (the owner, a node), who is refused at the
 * handshake (no certificate, a self-signed one, a foreign CA's) or by the
 * caller check (a revoked node certificate), and what each path answers.
 */
import { createServer as createHttpServer } from "node:http";
import { request, type RequestOptions } from "node:https";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Server } from "node:https";
import type { AddressInfo } from "node:net";
import { identifier, ownerCommonName, Revocations } from "@metropolis/curator";
import {
  CertificateAuthority,
  createEphemeralCertificate,
  generateKeyPair,
  nodeIdFromPublicKey,
  tlsMaterial,
  type ParsedCertificate,
} from "@metropolis/pki";
import { Counter, Registry } from "prom-client";
import { hostMetricsRegistry } from "../src/metrics-server";
import {
  discoveryDocument,
  secureMetricsServer,
  type DiscoveryGroup,
  type SecureMetricsOptions,
} from "../src/secure-metrics";

interface Answer {
  status: number;
  contentType: string | undefined;
  body: string;
}

let caPem: string;
let serverNodeId: string;
let tls: Record<
  "owner" | "node" | "revoked" | "ephemeral" | "foreign",
  { cert: string; key: string }
>;
let serverTls: { cert: string; key: string; ca: string };
let revocations: Revocations;
let caDer: Uint8Array;

beforeAll(async () => {
  const ca = await CertificateAuthority.create();
  const foreignCa = await CertificateAuthority.create();
  caPem = ca.certificate.toPem();
  caDer = ca.certificate.der;
  const pem = (c: ParsedCertificate, k: Uint8Array, issuer: ParsedCertificate = c) =>
    tlsMaterial({ certificate: c, privateKey: k, ca: issuer });
  const [self, node, revoked, owner, ephemeral, foreign] = Array.from({ length: 6 }, () =>
    generateKeyPair(),
  );
  serverNodeId = nodeIdFromPublicKey(self.publicKey);
  const revokedCertificate = await ca.issueNodeCertificate(revoked.publicKey);
  revocations = new Revocations(ca.certificate.der);
  await revocations.offer((await ca.revoke(await ca.createCrl(), revokedCertificate.serial)).der);
  tls = {
    owner: pem(
      await ca.issueUserCertificate(ownerCommonName, owner.publicKey),
      owner.privateKey,
      ca.certificate,
    ),
    node: pem(await ca.issueNodeCertificate(node.publicKey), node.privateKey, ca.certificate),
    revoked: pem(revokedCertificate, revoked.privateKey, ca.certificate),
    ephemeral: pem(await createEphemeralCertificate(ephemeral.privateKey), ephemeral.privateKey),
    foreign: pem(
      await foreignCa.issueUserCertificate(ownerCommonName, foreign.publicKey),
      foreign.privateKey,
      foreignCa.certificate,
    ),
  };
  serverTls = pem(await ca.issueNodeCertificate(self.publicKey), self.privateKey, ca.certificate);
});

const servers: Server[] = [];
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
  for (const c of cleanups.splice(0)) await c();
});

/** A server on a free loopback port; resolves with its port. */
async function serve(over: Partial<SecureMetricsOptions> = {}): Promise<number> {
  const core = new Registry();
  new Counter({ name: "test_core_total", help: "a core series", registers: [core] }).inc();
  const server = secureMetricsServer({
    host: "127.0.0.1",
    port: 0,
    tls: serverTls,
    identify: identifier(caDer, revocations),
    core,
    node: hostMetricsRegistry(),
    etcdSocket: () => undefined,
    discovery: () => undefined,
    ...over,
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

/** One GET over mTLS as `who` (or without a certificate), checking the server is node `serverNodeId`. */
function scrape(
  port: number,
  path: string,
  who: keyof typeof tls | "none",
  extra: RequestOptions = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path,
        agent: false,
        ca: caPem,
        ...(who === "none" ? {} : tls[who]),
        // Node certificates name the node ID, not an address.
        checkServerIdentity: (_host, cert) =>
          cert.subject.CN === serverNodeId ? undefined : new Error(`server is ${cert.subject.CN}`),
        ...extra,
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () =>
          resolve({ status: res.statusCode!, contentType: res.headers["content-type"], body }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end();
  });
}

describe("secureMetricsServer", () => {
  it("serves the owner and nodes: core and node exporters", async () => {
    const port = await serve();
    for (const who of ["owner", "node"] as const) {
      const core = await scrape(port, "/metrics/core", who);
      expect(core.status).toBe(200);
      expect(core.contentType).toMatch(/^text\/plain/);
      expect(core.body).toMatch(/^test_core_total 1$/m);
      const node = await scrape(port, "/metrics/node", who);
      expect(node.status).toBe(200);
      expect(node.body).toMatch(/^process_resident_memory_bytes /m);
      expect(node.body).toMatch(/^metropolis_host_load1 /m);
      expect(node.body).not.toMatch(/test_core_total/);
    }
  });

  it.each([
    ["no certificate", "none"],
    ["a self-signed (ephemeral) certificate", "ephemeral"],
    ["a certificate of another CA", "foreign"],
  ] as const)("refuses a client with %s at the TLS handshake", async (_what, who) => {
    const port = await serve();
    // TLS 1.3: the server's alert arrives after the client's side of the handshake.
    await expect(scrape(port, "/metrics/core", who)).rejects.toThrow(
      /alert|certificate|ECONNRESET|socket hang up/i,
    );
  });

  it("refuses a revoked node certificate with 403", async () => {
    const port = await serve();
    const answer = await scrape(port, "/metrics/core", "revoked");
    expect(answer.status).toBe(403);
    expect(answer.body).toMatch(/revoked/);
  });

  it("answers 404 for unknown paths and for /metrics/etcd without an etcd member", async () => {
    const port = await serve();
    const unknown = await scrape(port, "/metrics", "owner");
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatch(/\/metrics\/core/);
    expect((await scrape(port, "/metrics/etcd", "owner")).status).toBe(404);
  });

  it("refuses other methods and request bodies", async () => {
    const port = await serve();
    expect((await scrape(port, "/metrics/core", "owner", { method: "POST" })).status).toBe(405);
    expect(
      (await scrape(port, "/metrics/core", "owner", { headers: { "content-length": "5" } })).status,
    ).toBe(413);
  });

  it("proxies the etcd member's /metrics from its unix socket", async () => {
    const dir = await mkdtemp(join(tmpdir(), "metrics-etcd-"));
    const socketPath = join(dir, "client.sock:0");
    const fakeEtcd = createHttpServer((req, res) => {
      res.writeHead(req.url === "/metrics" ? 200 : 404, { "content-type": "text/plain" });
      res.end("etcd_server_has_leader 1\n");
    });
    await new Promise<void>((resolve) => fakeEtcd.listen(socketPath, resolve));
    cleanups.push(async () => {
      await new Promise((resolve) => fakeEtcd.close(resolve));
      await rm(dir, { recursive: true, force: true });
    });
    const port = await serve({ etcdSocket: () => socketPath });
    const etcd = await scrape(port, "/metrics/etcd", "node");
    expect(etcd.status).toBe(200);
    expect(etcd.body).toBe("etcd_server_has_leader 1\n");
    // And not to a caller refused.
    expect((await scrape(port, "/metrics/etcd", "revoked")).status).toBe(403);
  });

  it("serves the discovery document, 503 until the node knows its cluster", async () => {
    const known: { groups?: DiscoveryGroup[] } = {};
    const port = await serve({ discovery: () => known.groups });
    expect((await scrape(port, "/discovery", "owner")).status).toBe(503);
    known.groups = discoveryDocument(
      {
        nodes: [
          {
            id: "metropolis-a",
            publicKey: Buffer.alloc(0),
            addresses: [{ host: "10.0.0.1" }],
            consensusMember: true,
          },
          {
            id: "metropolis-b",
            publicKey: Buffer.alloc(0),
            addresses: [{ host: "10.0.0.2" }],
            consensusMember: false,
          },
        ],
      },
      7838,
    );
    const answer = await scrape(port, "/discovery", "owner");
    expect(answer.status).toBe(200);
    expect(answer.contentType).toBe("application/json");
    expect(JSON.parse(answer.body)).toEqual([
      ...["core", "node", "etcd"].map((exporter) => ({
        targets: ["10.0.0.1:7838"],
        labels: {
          __metrics_path__: `/metrics/${exporter}`,
          __scheme__: "https",
          node_id: "metropolis-a",
          exporter,
        },
      })),
      ...["core", "node"].map((exporter) => ({
        targets: ["10.0.0.2:7838"],
        labels: {
          __metrics_path__: `/metrics/${exporter}`,
          __scheme__: "https",
          node_id: "metropolis-b",
          exporter,
        },
      })),
    ]);
  });
});
