/**
 * The command line and configuration file of `metropolis-node`, validated
 * before anything starts: every bad flag or field is a `NodeConfigError`
 * naming it.
 *
 *   metropolis-node --root DIR --address IP [--parameters FILE] [--config FILE]
 *                   [--recover-from BACKUP --owner-key KEY]
 *
 * The configuration file (JSON) holds what a real node would get from its
 * image: ports, the workloads it runs as a worker, and timings.
 */
import { readFile } from "node:fs/promises";
import { isIPv4 } from "node:net";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { defaultPeerPort } from "@metropolis/consensus";
import { defaultCuratorPort } from "@metropolis/curator";
import { validateWorkloads, type WorkloadSpec } from "@metropolis/roleserve";
import { defaultDebugPort } from "./debug-service";
import { NodeError } from "./errors";
import { defaultMetricsPort } from "./metrics-server";
import { usage } from "./node-usage";

export class NodeConfigError extends NodeError {
  constructor(message: string) {
    super(message);
  }
}

export interface NodePorts {
  consensus: number;
  curator: number;
  debug: number;
  /** Metrics over mutual TLS (owner or node certificates), at the node's address. */
  metrics: number;
  /**
   * Opt-in: plain-HTTP metrics (/metrics, no authentication) on 127.0.0.1
   * at this port, for a scraper on the node's own machine. Off when unset.
   */
  plainMetrics?: number;
}

export interface NodeConfig {
  /** Where the node keeps its storage (esp/, data/, ephemeral/) and machine key. */
  root: string;
  /** The node's IP address: it binds and is reached there. */
  address: string;
  /** Node parameters file (as metroctl writes it); copied to the ESP. */
  parametersPath?: string;
  /** A backup (`metroctl cluster backup`) to restore the cluster from, onto this node. */
  recoverFrom?: string;
  /** The owner's private key (metroctl's owner-key.pem) that opens the backup's keyring. */
  ownerKeyPath?: string;
  ports: NodePorts;
  workloads: WorkloadSpec[];
  /** etcd raft timings tuned for loopback (fast elections) instead of etcd's defaults. */
  loopbackTimings: boolean;
  /** Curator election lease TTL, seconds. */
  leaderTtlSeconds: number;
  /** Heartbeat timeout of the curator, ms; nodes beat at half of it. */
  heartbeatTimeoutMs: number;
  /**
   * Mount a tmpfs for `ephemeral/` when running as root (default true); when
   * false, or when the mount fails, a private directory under /dev/shm.
   */
  ephemeralTmpfs: boolean;
}

/**
 * The configuration file (`--config`, JSON) as written: every field
 * optional, with the defaults `loadNodeConfig` applies; no other field is
 * accepted.
 */
export interface NodeConfigFile {
  ports?: Partial<NodePorts>;
  workloads?: WorkloadSpec[];
  loopbackTimings?: boolean;
  leaderTtlSeconds?: number;
  heartbeatTimeoutMs?: number;
  ephemeralTmpfs?: boolean;
}

export { usage } from "./node-usage";

function port(value: unknown, field: string): number {
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > 65535) {
    throw new NodeConfigError(
      `${field} must be a port number (1-65535), got ${JSON.stringify(value)}`,
    );
  }
  return value as number;
}

function positive(value: unknown, field: string): number {
  if (typeof value !== "number" || !(value > 0)) {
    throw new NodeConfigError(`${field} must be a positive number, got ${JSON.stringify(value)}`);
  }
  return value;
}

const configKeys = [
  "ports",
  "workloads",
  "loopbackTimings",
  "leaderTtlSeconds",
  "heartbeatTimeoutMs",
  "ephemeralTmpfs",
] as const satisfies readonly (keyof NodeConfigFile)[];

/** Parses the command line (without `node` and the script) and reads the configuration file. */
export async function loadNodeConfig(argv: string[]): Promise<NodeConfig> {
  let values: {
    root?: string;
    address?: string;
    parameters?: string;
    config?: string;
    "recover-from"?: string;
    "owner-key"?: string;
  };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        root: { type: "string" },
        address: { type: "string" },
        parameters: { type: "string" },
        config: { type: "string" },
        "recover-from": { type: "string" },
        "owner-key": { type: "string" },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    throw new NodeConfigError(`${e instanceof Error ? e.message : String(e)}\n${usage}`);
  }
  if (!values.root) throw new NodeConfigError(`--root is required\n${usage}`);
  if (!values.address) throw new NodeConfigError(`--address is required\n${usage}`);
  if (!isIPv4(values.address)) {
    throw new NodeConfigError(
      `--address must be an IPv4 address, got ${JSON.stringify(values.address)}`,
    );
  }
  if (values["recover-from"] !== undefined && values["owner-key"] === undefined) {
    throw new NodeConfigError(
      `--recover-from needs --owner-key (the owner's key opens the backup)\n${usage}`,
    );
  }
  if (values["owner-key"] !== undefined && values["recover-from"] === undefined) {
    throw new NodeConfigError(`--owner-key is only for --recover-from\n${usage}`);
  }
  if (values["recover-from"] !== undefined && values.parameters !== undefined) {
    throw new NodeConfigError(
      `--recover-from and --parameters exclude each other: a restored node enrols from the backup\n${usage}`,
    );
  }
  const file = values.config ? await readConfigFile(resolve(values.config)) : {};
  const where = values.config ?? "config";
  const ports = (file.ports ?? {}) as Record<string, unknown>;
  for (const key of Object.keys(ports)) {
    if (!["consensus", "curator", "debug", "metrics", "plainMetrics"].includes(key)) {
      throw new NodeConfigError(`${where}: unknown port ${JSON.stringify(key)}`);
    }
  }
  let workloads: WorkloadSpec[];
  try {
    workloads = (file.workloads ?? []) as WorkloadSpec[];
    if (!Array.isArray(workloads)) throw new Error("must be an array");
    validateWorkloads(workloads);
  } catch (e) {
    throw new NodeConfigError(`${where}: workloads: ${e instanceof Error ? e.message : String(e)}`);
  }
  for (const flag of ["loopbackTimings", "ephemeralTmpfs"] as const) {
    if (file[flag] !== undefined && typeof file[flag] !== "boolean") {
      throw new NodeConfigError(`${where}: ${flag} must be true or false`);
    }
  }
  return {
    root: resolve(values.root),
    address: values.address,
    parametersPath: values.parameters ? resolve(values.parameters) : undefined,
    recoverFrom: values["recover-from"] ? resolve(values["recover-from"]) : undefined,
    ownerKeyPath: values["owner-key"] ? resolve(values["owner-key"]) : undefined,
    ports: {
      consensus: port(ports.consensus ?? defaultPeerPort, `${where}: ports.consensus`),
      curator: port(ports.curator ?? defaultCuratorPort, `${where}: ports.curator`),
      debug: port(ports.debug ?? defaultDebugPort, `${where}: ports.debug`),
      metrics: port(ports.metrics ?? defaultMetricsPort, `${where}: ports.metrics`),
      ...(ports.plainMetrics === undefined
        ? {}
        : { plainMetrics: port(ports.plainMetrics, `${where}: ports.plainMetrics`) }),
    },
    workloads,
    loopbackTimings: (file.loopbackTimings as boolean | undefined) ?? false,
    leaderTtlSeconds: positive(file.leaderTtlSeconds ?? 10, `${where}: leaderTtlSeconds`),
    heartbeatTimeoutMs: positive(file.heartbeatTimeoutMs ?? 10_000, `${where}: heartbeatTimeoutMs`),
    ephemeralTmpfs: (file.ephemeralTmpfs as boolean | undefined) ?? true,
  };
}

async function readConfigFile(path: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (e) {
    throw new NodeConfigError(
      `cannot read config ${path}: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new NodeConfigError(
      `config ${path} is not valid JSON: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new NodeConfigError(`config ${path} must be a JSON object`);
  }
  for (const key of Object.keys(parsed)) {
    if (!(configKeys as readonly string[]).includes(key)) {
      throw new NodeConfigError(
        `config ${path}: unknown field ${JSON.stringify(key)} (known: ${configKeys.join(", ")})`,
      );
    }
  }
  return parsed as Record<string, unknown>;
}
