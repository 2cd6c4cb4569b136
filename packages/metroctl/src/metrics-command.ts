/**
 * `metrics ID [EXPORTER]`: one of a node's Prometheus exporters (core, node,
 * etcd), fetched over mutual TLS from its metrics endpoint (default port
 * 7838) at the address the node reported to the cluster. metroctl presents
 * the owner certificate, and verifies the node by its certificate from the
 * cluster CA, which must name the node asked for. The text is printed as
 * the node serves it.
 */
import { request } from "node:https";
import { parseCertificate } from "@metropolis/pki";
import type { CommandContext } from "./command-context";
import type { OwnerCredentials } from "./config-dir";
import { MetroctlError } from "./errors";
import { defaultMetricsPort, metricsExporters } from "./flag-defaults";
import { nodeEndpoint } from "./node-endpoint";
import { parsePortFlag } from "./flag-values";

export { defaultMetricsPort, metricsExporters } from "./flag-defaults";

/** Largest answer metroctl reads (etcd's exposition is ~200 KiB). */
export const maxMetricsBytes = 16 * 1024 * 1024;

/** The node answered with something other than 200. */
export class MetricsFetchError extends MetroctlError {
  constructor(
    readonly status: number,
    detail: string,
  ) {
    super(`the node answered ${status}: ${detail.trim().slice(0, 512)}`);
  }
}

/** `metrics ID [EXPORTER] [--metrics-port P]` */
export async function nodeMetrics(
  ctx: CommandContext,
  id: string,
  exporter: string | undefined,
  opts: { metricsPort?: string },
): Promise<void> {
  const which = exporter ?? "core";
  if (!(metricsExporters as readonly string[]).includes(which)) {
    throw new MetroctlError(
      `unknown exporter ${JSON.stringify(which.slice(0, 64))}: one of ${metricsExporters.join(", ")}`,
    );
  }
  const port =
    opts.metricsPort === undefined
      ? defaultMetricsPort
      : parsePortFlag(opts.metricsPort, "--metrics-port");
  const { owner, host } = await nodeEndpoint(ctx, id);
  const body = await fetchNodeMetrics({
    owner,
    host,
    port,
    id,
    exporter: which,
    timeoutMs: ctx.dialTimeoutMs,
    signal: ctx.signal,
  });
  ctx.io.stdout.write(body);
}

/** Where and how {@link fetchNodeMetrics} asks. */
export interface NodeMetricsRequest {
  /** The owner's credentials, which the node checks. */
  owner: OwnerCredentials;
  /** The node's address and metrics port. */
  host: string;
  port: number;
  /** The node expected to answer (its certificate must name it). */
  id: string;
  /** One of {@link metricsExporters}. */
  exporter: string;
  /** How long to wait for the node's answer. */
  timeoutMs: number;
  signal?: AbortSignal;
}

/**
 * One exporter of node `id`'s metrics, over mutual TLS, at most
 * {@link maxMetricsBytes}; rejects with MetricsFetchError when the node
 * answers other than 200, MetroctlError when it does not answer in time.
 */
export function fetchNodeMetrics(r: NodeMetricsRequest): Promise<string> {
  const { owner, host, port, id } = r;
  return new Promise<string>((resolve, reject) => {
    const req = request(
      {
        host,
        port,
        path: `/metrics/${r.exporter}`,
        agent: false,
        ca: owner.ca,
        cert: owner.cert,
        key: owner.key,
        // Nodes are dialled by IP; their certificates name node IDs.
        servername: "",
        checkServerIdentity: (_host, cert) => {
          const cn = parseCertificate(cert.raw).commonName;
          return cn === id
            ? undefined
            : new Error(`expected node ${id} here, but the node answering is ${cn ?? "unnamed"}`);
        },
        timeout: r.timeoutMs,
        signal: r.signal,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (c: Buffer) => {
          size += c.length;
          if (size > maxMetricsBytes) {
            res.destroy(new MetroctlError(`the node's answer exceeds ${maxMetricsBytes} bytes`));
          } else chunks.push(c);
        });
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          if (res.statusCode === 200) resolve(text);
          else reject(new MetricsFetchError(res.statusCode ?? 0, text));
        });
        res.on("error", reject);
      },
    );
    req.on("timeout", () =>
      req.destroy(new MetroctlError(`node ${id} at ${host}:${port} did not answer in time`)),
    );
    req.on("error", reject);
    req.end();
  });
}
