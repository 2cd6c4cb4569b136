/**
 * e2e metrics: a bootstrapped node (consensus member) and a registered one
 * (no roles), scraped the way a Prometheus server of the owner would — over
 * mutual TLS with the owner certificate, verifying each node's certificate
 * against the cluster CA and its node ID — at /metrics/core, /metrics/node
 * and /metrics/etcd; and the /discovery document, which lists every UP node's
 * targets.
 */
import { request } from "node:https";
import { parseCertificate } from "@metropolis/pki";
import { eventually } from "@metropolis/supervisor/testing";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import { E2eCluster } from "./e2e-cluster";

jest.setTimeout(180_000);

const metricsPort = 7838;
let e2e: E2eCluster;

beforeAll(async () => {
  e2e = await E2eCluster.create("metrics", { nodes: 2, consensusOnEveryNode: false });
  await e2e.up();
});

afterAll(async () => {
  await e2e?.teardown();
});

/** GET `path` from `node`'s metrics endpoint; `as` "none" presents no certificate. */
async function scrape(
  node: ClusterNode,
  path: string,
  as: "owner" | "none" = "owner",
): Promise<{ status: number; body: string }> {
  const owner = await e2e.owner();
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: node.address,
        port: metricsPort,
        path,
        agent: false,
        servername: "",
        ca: owner.ca,
        ...(as === "owner" ? { cert: owner.cert, key: owner.key } : {}),
        checkServerIdentity: (_host, cert) => {
          const cn = parseCertificate(cert.raw).commonName;
          return cn === node.id ? undefined : new Error(`expected ${node.id}, got ${cn}`);
        },
        timeout: 10_000,
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode!, body }));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", reject);
    req.end();
  });
}

describe("metrics over mutual TLS", () => {
  it("serves supervisor, node and etcd series to the owner", async () => {
    const member = e2e.node(1);
    const core = await scrape(member, "/metrics/core");
    expect(core.status).toBe(200);
    expect(core.body).toMatch(
      /^metropolis_supervisor_node_state\{dn="root.metrics",state="healthy"\} 1$/m,
    );
    expect(core.body).toMatch(/^metropolis_consensus_running 1$/m);
    const node = await scrape(member, "/metrics/node");
    expect(node.status).toBe(200);
    expect(node.body).toMatch(/^process_resident_memory_bytes \d+/m);
    expect(node.body).toMatch(/^metropolis_host_memory_total_bytes \d+/m);
    const etcd = await scrape(member, "/metrics/etcd");
    expect(etcd.status).toBe(200);
    expect(etcd.body).toMatch(/^etcd_server_has_leader 1$/m);
  });

  it("answers 404 for etcd on a node without a member, and for unknown paths", async () => {
    const plain = e2e.node(2);
    expect((await scrape(plain, "/metrics/core")).status).toBe(200);
    expect((await scrape(plain, "/metrics/etcd")).status).toBe(404);
    expect((await scrape(plain, "/metrics")).status).toBe(404);
  });

  it("refuses a client without a certificate at the handshake", async () => {
    await expect(scrape(e2e.node(1), "/metrics/core", "none")).rejects.toThrow();
  });

  it("metroctl metrics prints a node's exporter", async () => {
    const text = await e2e.cluster.metroctlOk(["node", "metrics", e2e.node(1).id, "etcd"]);
    expect(text).toMatch(/^etcd_server_has_leader 1$/m);
  });

  it("the discovery document lists every UP node's targets", async () => {
    const [first, second] = [e2e.node(1), e2e.node(2)];
    const expected = [
      ...[first, second].flatMap((n) =>
        (n === first ? ["core", "node", "etcd"] : ["core", "node"]).map((exporter) => ({
          targets: [`${n.address}:${metricsPort}`],
          labels: {
            __metrics_path__: `/metrics/${exporter}`,
            __scheme__: "https",
            node_id: n.id,
            exporter,
          },
        })),
      ),
    ].sort((a, b) => a.labels.node_id.localeCompare(b.labels.node_id));
    // Every node serves it, from its own view of the cluster.
    for (const node of [first, second]) {
      await eventually(
        async () => {
          const res = await scrape(node, "/discovery");
          if (res.status !== 200) return false;
          const groups = JSON.parse(res.body) as typeof expected;
          return JSON.stringify(groups) === JSON.stringify(expected);
        },
        `node ${node.id}'s discovery document to list both nodes`,
        { timeoutMs: 30_000, intervalMs: 500 },
      );
    }
  });
});
