/**
 * The node's metrics over mutual TLS, for a Prometheus server of the
 * cluster's owner: `https://<address>:7838/…`, served with the node
 * certificate and requiring a client certificate of the cluster CA — the
 * owner's or a node's (a Prometheus server is given the owner's, or runs
 * with a node's). Callers are classified by the curator's `identifier`, the
 * check the Debug service makes, so revoked certificates (of deleted nodes)
 * are refused too.
 *
 *   /metrics/core   the node's own: supervision tree, cluster state, roles
 *   /metrics/node   host and process figures (CPU, memory, event loop, load)
 *   /metrics/etcd   the local etcd member's /metrics, proxied from its unix
 *                   client socket (404 on a node without a member)
 *   /discovery      Prometheus HTTP service discovery: every UP node's targets
 *
 * TLS itself verifies the client certificate against the cluster CA
 * (`requestCert`, `rejectUnauthorized`): a self-signed (registering node's)
 * certificate, or none, fails the handshake. The server reads no request
 * body (a request announcing one is refused 413), and bounds connections,
 * header count and size, and the time to send them.
 */
import { request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import type { TLSSocket } from "node:tls";
import {
  metricsEndpointKey,
  PermissionDeniedError,
  requireAccess,
  UnauthenticatedError,
  type Caller,
  type TlsPem,
} from "@metropolis/curator";
import type { common } from "@metropolis/proto";
import type { RunContext, Runnable } from "@metropolis/supervisor";
import type { Registry } from "prom-client";
import type { IdentifyCaller } from "./debug-service";
import { MetricsListenError, MetricsServerError } from "./metrics-server";

/** Most connections the server keeps open at once. */
export const maxMetricsConnections = 64;
/** Most request headers read. */
export const maxMetricsHeaders = 32;
/** Largest request header block, bytes. */
export const maxMetricsHeaderBytes = 8 * 1024;
/** Time a client has to send its headers, ms. */
export const metricsHeadersTimeoutMs = 10_000;
/** Time a request may take in all, ms (the etcd proxy included). */
export const metricsRequestTimeoutMs = 30_000;
/** Time a client has to finish the TLS handshake, ms. */
export const metricsHandshakeTimeoutMs = 10_000;

/** One target group of Prometheus HTTP service discovery. */
export interface DiscoveryGroup {
  targets: string[];
  labels: Record<string, string>;
}

/** The exporters a node serves under /metrics/. */
export const exporters = ["core", "node", "etcd"] as const;
export type Exporter = (typeof exporters)[number];

/**
 * The discovery document of `directory`: per UP node, one group per exporter
 * (etcd only for consensus members), with the path and scheme as
 * Prometheus's `__metrics_path__` and `__scheme__` labels, and the node's ID
 * as `node_id`. Sorted by node ID (the directory is).
 */
export function discoveryDocument(
  directory: common.ClusterDirectory,
  port: number,
): DiscoveryGroup[] {
  const groups: DiscoveryGroup[] = [];
  for (const node of directory.nodes) {
    const host = node.addresses[0]?.host;
    if (!host) continue;
    const target = `${host.includes(":") ? `[${host}]` : host}:${port}`;
    for (const exporter of exporters) {
      if (exporter === "etcd" && !node.consensusMember) continue;
      groups.push({
        targets: [target],
        labels: {
          __metrics_path__: `/metrics/${exporter}`,
          __scheme__: "https",
          node_id: node.id,
          exporter,
        },
      });
    }
  }
  return groups;
}

export interface SecureMetricsOptions {
  host: string;
  port: number;
  /** The node's certificate and key; `ca` is the cluster CA that client certificates must chain to. */
  tls: TlsPem;
  /** Who is calling: `identifier(caDer, revocations)` from @metropolis/curator, as for Debug. */
  identify: IdentifyCaller;
  /** The node's own metrics. */
  core: Registry;
  /** Host and process figures. */
  node: Registry;
  /** The local etcd member's client socket, or undefined while the node runs none. */
  etcdSocket: () => string | undefined;
  /** Every UP node's targets, or undefined while the node does not know its cluster yet. */
  discovery: () => DiscoveryGroup[] | undefined;
}

const text = (res: ServerResponse, status: number, body: string, headers = {}) => {
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8", ...headers });
  res.end(`${body}\n`);
};

/**
 * Classifies the caller of `req`; a node, the owner or a scoped credential
 * whose role may read metrics (`Metrics.Scrape` in access-roles.ts) passes,
 * anyone else gets a 403.
 */
async function authorize(
  identify: IdentifyCaller,
  req: IncomingMessage,
): Promise<string | undefined> {
  const socket = req.socket as TLSSocket;
  let caller: Caller;
  try {
    caller = await identify({
      getAuthContext: () => ({ sslPeerCertificate: socket.getPeerCertificate() }),
    });
  } catch (e) {
    if (e instanceof UnauthenticatedError) return e.message;
    throw e;
  }
  if (caller.kind === "node" || caller.kind === "owner") return undefined;
  if (caller.kind === "scoped") {
    try {
      requireAccess(caller, metricsEndpointKey);
      return undefined;
    } catch (e) {
      if (e instanceof PermissionDeniedError) return e.message;
      throw e;
    }
  }
  return `metrics need a node or owner certificate of this cluster, not ${caller.kind === "anonymous" ? "none" : `an ${caller.kind} one`}`;
}

/** Proxies the etcd member's /metrics from its unix socket into `res`. */
function proxyEtcd(socketPath: string, method: string, res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const upstream = httpRequest(
      { socketPath, path: "/metrics", method, agent: false, timeout: metricsRequestTimeoutMs },
      (answer) => {
        res.writeHead(answer.statusCode === 200 ? 200 : 502, {
          "content-type": answer.headers["content-type"] ?? "text/plain; version=0.0.4",
        });
        answer.pipe(res);
        answer.on("end", resolve);
        answer.on("error", () => (res.destroy(), resolve()));
      },
    );
    upstream.on("timeout", () => upstream.destroy(new Error("etcd did not answer in time")));
    // A scraper that goes away ends the upstream request too.
    res.on("close", () => {
      upstream.destroy();
      resolve();
    });
    upstream.on("error", (e) => {
      if (!res.headersSent) text(res, 502, `etcd metrics unavailable: ${e.message}`);
      else res.destroy();
      resolve();
    });
    upstream.end();
  });
}

/** Answers one request; see the module comment. */
async function answer(
  opts: SecureMetricsOptions,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const refused = await authorize(opts.identify, req);
  if (refused !== undefined) return text(res, 403, refused, { connection: "close" });
  if (req.method !== "GET" && req.method !== "HEAD") {
    return text(res, 405, `method ${req.method} not allowed`, { allow: "GET, HEAD" });
  }
  // Nothing is ever read from a body; a request announcing one is refused.
  if (
    req.headers["transfer-encoding"] !== undefined ||
    Number(req.headers["content-length"] ?? 0) > 0
  ) {
    return text(res, 413, "requests take no body", { connection: "close" });
  }
  const path = new URL(req.url ?? "/", "https://metrics").pathname;
  const head = req.method === "HEAD";
  const serve = async (registry: Registry) => {
    const body = await registry.metrics();
    res.writeHead(200, { "content-type": registry.contentType });
    res.end(head ? undefined : body);
  };
  switch (path) {
    case "/metrics/core":
      return serve(opts.core);
    case "/metrics/node":
      return serve(opts.node);
    case "/metrics/etcd": {
      const socket = opts.etcdSocket();
      if (socket === undefined) return text(res, 404, "this node runs no etcd member");
      return proxyEtcd(socket, head ? "HEAD" : "GET", res);
    }
    case "/discovery": {
      const groups = opts.discovery();
      if (groups === undefined) {
        return text(res, 503, "this node does not know its cluster's nodes yet", {
          "retry-after": "5",
        });
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(head ? undefined : JSON.stringify(groups));
      return;
    }
    default:
      return text(
        res,
        404,
        `not found: ${path.slice(0, 128)}; served: /metrics/core, /metrics/node, /metrics/etcd, /discovery`,
      );
  }
}

/** The HTTPS server of {@link secureMetricsRunnable}, not listening yet; exported for tests. */
export function secureMetricsServer(opts: SecureMetricsOptions): Server {
  const server = createServer(
    {
      cert: opts.tls.cert,
      key: opts.tls.key,
      ca: opts.tls.ca,
      requestCert: true,
      rejectUnauthorized: true,
      minVersion: "TLSv1.3",
      handshakeTimeout: metricsHandshakeTimeoutMs,
      maxHeaderSize: maxMetricsHeaderBytes,
      headersTimeout: metricsHeadersTimeoutMs,
      requestTimeout: metricsRequestTimeoutMs,
      keepAliveTimeout: 5_000,
    },
    (req, res) =>
      void answer(opts, req, res).catch((e: unknown) => {
        if (res.headersSent) return void res.destroy();
        text(res, 500, `metrics failed: ${e instanceof Error ? e.message : String(e)}`);
      }),
  );
  server.maxHeadersCount = maxMetricsHeaders;
  server.maxConnections = maxMetricsConnections;
  return server;
}

/**
 * Serves {@link secureMetricsServer} at `host:port`. Healthy once listening;
 * fails with MetricsListenError when the address cannot be bound, or
 * MetricsServerError when the server breaks later; when its context aborts
 * it closes the server and every connection.
 */
export function secureMetricsRunnable(opts: SecureMetricsOptions): Runnable {
  const address = `${opts.host.includes(":") ? `[${opts.host}]` : opts.host}:${opts.port}`;
  return async (ctx: RunContext) => {
    const server = secureMetricsServer(opts);
    try {
      await new Promise<void>((resolve, reject) => {
        server.once("error", (e) => reject(new MetricsListenError(address, e)));
        server.listen(opts.port, opts.host, () => resolve());
      });
      const failed = new Promise<never>((_resolve, reject) =>
        server.once("error", (e) => reject(new MetricsServerError(address, e))),
      );
      ctx.logger.info(`serving metrics over mTLS on https://${address}/metrics/{core,node,etcd}`);
      ctx.healthy();
      await Promise.race([ctx.untilAborted(), failed]);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  };
}
