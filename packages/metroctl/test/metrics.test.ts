/**
 * `metrics` against a node's metrics endpoint over real mTLS — an HTTPS
 * server with a node certificate of the cluster CA that requires a client
 * certificate of that CA (as packages/node's secure-metrics.ts does) — with
 * the node's address found through the real curator.
 */
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { freePort } from "@metropolis/consensus/testing";
import { parseCertificate, tlsMaterial } from "@metropolis/pki";
import { common } from "@metropolis/proto";
import { metroctl, clusterPerFile, type MetroctlCluster } from "./cluster-fixture";

let cluster: MetroctlCluster;
let config: string;
const servers: Server[] = [];

clusterPerFile((c, dir) => ((cluster = c), (config = dir)));

afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

interface MetricsServer {
  port: number;
  /** Paths asked for, with the CN of the client certificate presented. */
  requests: { path: string; client: string | undefined }[];
}

/**
 * Serves metrics on a random 127.0.0.x presenting the certificate of `as`
 * (default the first node), and points `nodeId`'s reported address at it.
 */
async function serveMetrics(
  nodeId: string,
  as: { certificate: Uint8Array; privateKey: Uint8Array } = cluster.leader.firstNode,
): Promise<MetricsServer> {
  const host = `127.0.0.${2 + Math.floor(Math.random() * 250)}`;
  const port = await freePort(host);
  const tls = tlsMaterial({
    certificate: as.certificate,
    privateKey: as.privateKey,
    ca: cluster.leader.caCertificate,
  });
  const requests: MetricsServer["requests"] = [];
  const server = createServer(
    { ...tls, requestCert: true, rejectUnauthorized: true },
    (req, res) => {
      const raw = (req.socket as TLSSocket).getPeerCertificate().raw;
      requests.push({ path: req.url ?? "", client: parseCertificate(raw).commonName });
      if (req.url === "/metrics/etcd") {
        res.writeHead(404, { "content-type": "text/plain" });
        return res.end("this node runs no etcd member\n");
      }
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4" });
      res.end(`# TYPE up gauge\nup{path="${req.url}"} 1\n`);
    },
  );
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  await cluster.leader.updateNode(nodeId, (n) => ({
    ...n,
    status: common.NodeStatus.fromPartial({ externalAddress: host }),
  }));
  return { port: (server.address() as AddressInfo).port, requests };
}

describe("metrics", () => {
  it("prints the node's core exporter by default, as the owner", async () => {
    const id = cluster.leader.firstNode.nodeId;
    const server = await serveMetrics(id);
    const res = await metroctl(config, [
      "node",
      "metrics",
      id,
      "--metrics-port",
      String(server.port),
    ]);
    expect(res).toMatchObject({ code: 0, stderr: "" });
    expect(res.stdout).toBe('# TYPE up gauge\nup{path="/metrics/core"} 1\n');
    expect(server.requests).toEqual([{ path: "/metrics/core", client: "owner" }]);
  });

  it("fetches the exporter asked for", async () => {
    const id = cluster.leader.firstNode.nodeId;
    const server = await serveMetrics(id);
    const res = await metroctl(config, [
      "node",
      "metrics",
      id,
      "node",
      "--metrics-port",
      String(server.port),
    ]);
    expect(res).toMatchObject({
      code: 0,
      stdout: 'up{path="/metrics/node"} 1\n'.replace(/^/, "# TYPE up gauge\n"),
    });
  });

  it("reports the node's refusal in one line", async () => {
    const id = cluster.leader.firstNode.nodeId;
    const server = await serveMetrics(id);
    const res = await metroctl(config, [
      "node",
      "metrics",
      id,
      "etcd",
      "--metrics-port",
      String(server.port),
    ]);
    expect(res).toMatchObject({
      code: 1,
      stderr: "metroctl: node metrics: the node answered 404: this node runs no etcd member\n",
    });
  });

  it("refuses a node that presents another node's certificate", async () => {
    const impostor = await cluster.leader.addNode();
    const server = await serveMetrics(impostor.nodeId);
    const res = await metroctl(config, [
      "node",
      "metrics",
      impostor.nodeId,
      "--metrics-port",
      String(server.port),
    ]);
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(
      new RegExp(
        `^metroctl: node metrics: expected node ${impostor.nodeId} here, but the node answering is ${cluster.leader.firstNode.nodeId}\\n$`,
      ),
    );
    expect(server.requests).toEqual([]);
  });

  it("refuses an unknown exporter before dialling anything", async () => {
    const res = await metroctl(config, [
      "node",
      "metrics",
      cluster.leader.firstNode.nodeId,
      "disk",
    ]);
    expect(res).toMatchObject({
      code: 1,
      stderr: 'metroctl: node metrics: unknown exporter "disk": one of core, node, etcd\n',
    });
  });
});
