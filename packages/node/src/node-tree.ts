/**
 * The node's supervision tree: what `metropolis-node` runs.
 *
 *   root
 *    ├─ enrolment   ClusterManager: join / bootstrap / register, then status
 *    ├─ roleserver  control plane, workloads, status, heartbeat, directory
 *    ├─ debug       Debug and NodeManagement gRPC services (once the node has credentials)
 *    ├─ metrics     Prometheus over mTLS at :7838 /metrics/{core,node,etcd}, /discovery
 *    └─ plainmetrics  plain /metrics on 127.0.0.1 (only when the config asks for it)
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Server } from "@grpc/grpc-js";
import { ClusterManager } from "@metropolis/cluster";
import { localTimings } from "@metropolis/consensus";
import {
  curatorServerCredentials,
  DefragmentGate,
  identifier,
  serverLimits,
} from "@metropolis/curator";
import { Followers, waitFor } from "@metropolis/event";
import type { NodeRoot } from "@metropolis/localstorage";
import { api, common } from "@metropolis/proto";
import { credentialsPem, Roleserver } from "@metropolis/roleserve";
import type { Runnable, Supervisor } from "@metropolis/supervisor";
import { grpcServerRunnable } from "@metropolis/supervisor/grpc";
import type { Registry } from "prom-client";
import { debugServer, nodeStreams, type ConditionSource } from "./debug-service";
import { nodeManagementServer, type PowerAction } from "./node-management";
import { NodeError } from "./errors";
import { metricsRunnable } from "./metrics-server";
import { discoveryDocument, secureMetricsRunnable, type DiscoveryGroup } from "./secure-metrics";
import { nodeMetricsRunnable } from "./node-metrics";
import type { NodeConfig } from "./node-config";

/** This package's package.json could not be read, or holds no version. */
export class NodeVersionError extends NodeError {
  constructor(path: string, options?: { cause?: unknown }) {
    super(`no version in ${path}`, options);
  }
}

/**
 * The version in this package's package.json, one directory up from this
 * file in src/ (tests, run from sources), in dist/ (tsc's build) and in
 * bundle/ (esbuild's bundle, where `__dirname` is the bundle's directory).
 */
function packageVersion(): string {
  const path = join(__dirname, "..", "package.json");
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new NodeVersionError(path, { cause: e });
  }
  if (typeof parsed === "object" && parsed !== null && "version" in parsed) {
    const { version } = parsed;
    if (typeof version === "string" && version !== "") return version;
  }
  throw new NodeVersionError(path);
}

/** The node software's version (its package.json's), reported in its status. */
export const nodeVersion = packageVersion();

export interface NodeServices {
  manager: ClusterManager;
  roleserver: Roleserver;
  /** The root runnable; needs the supervisor it runs under (for the debug service). */
  root: (supervisor: () => Supervisor) => Runnable;
}

/** The node's metrics registries: its own (the supervisor's go here too) and its host's. */
export interface NodeRegistries {
  core: Registry;
  node: Registry;
}

/**
 * @param power - what NodeManagement.Reboot and PowerOff ask for, once
 *   answered (main.ts stops the node and exits with the matching status).
 *   Default: nothing (a test that does not stop anything).
 */
export function nodeServices(
  config: NodeConfig,
  storage: NodeRoot,
  registries: NodeRegistries,
  power: (action: PowerAction) => void = () => {},
): NodeServices {
  const machineKeyPath = join(config.root, "machine.key");
  const roleserver = new Roleserver({
    storage,
    machineKeyPath,
    host: config.address,
    consensusPort: config.ports.consensus,
    curatorPort: config.ports.curator,
    timings: config.loopbackTimings ? localTimings : undefined,
    // On loopback, membership settles in a second rather than etcd-production's five.
    autopromoteIntervalMs: config.loopbackTimings ? 1_000 : undefined,
    reconcileIntervalMs: config.loopbackTimings ? 1_000 : undefined,
    leaderTtlSeconds: config.leaderTtlSeconds,
    heartbeatTimeoutMs: config.heartbeatTimeoutMs,
    heartbeatIntervalMs: config.heartbeatTimeoutMs / 2,
    version: nodeVersion,
    bootId: randomBytes(16).toString("hex"),
    workloads: config.workloads,
  });
  const manager = new ClusterManager({
    storage,
    machineKeyPath,
    parametersPath: config.parametersPath,
    roleserver,
    address: config.address,
    curatorPort: config.ports.curator,
  });

  const conditions: ConditionSource = async (condition) => {
    const status = await waitFor(manager.status, () => true);
    switch (condition) {
      case api.Condition.STORAGE_MOUNTED:
        return { ok: status.credentials !== undefined };
      case api.Condition.CLUSTER_HOME:
        return {
          ok: status.state === common.ClusterState.HOME,
          detail: common.clusterStateToJSON(status.state),
        };
      case api.Condition.CONSENSUS_RUNNING:
        return { ok: status.hasLocalConsensus };
      default: {
        // Unset until the node has credentials; not worth waiting for here.
        const connection = await waitFor(
          roleserver.values.curatorConnection,
          () => true,
          AbortSignal.timeout(100),
        ).catch(() => undefined);
        if (!connection) return { ok: false, detail: "no credentials yet" };
        try {
          const leader = await connection.connection.leader(2_000);
          return { ok: true, detail: `leader ${leader.nodeId} at ${leader.host}:${leader.port}` };
        } catch (e) {
          return { ok: false, detail: e instanceof Error ? e.message : String(e) };
        }
      }
    }
  };

  const nodeMetrics = nodeMetricsRunnable(registries.core, manager, roleserver);
  /** NodeManagement.DefragmentMember's: one gate for the node's member, across restarts of the debug service. */
  const defragmentGate = new DefragmentGate();

  /** The mTLS metrics server, once the node has credentials (it serves with its certificate). */
  const secureMetrics: Runnable = async (ctx) => {
    const { credentials } = await waitFor(
      manager.status,
      (s) => s.credentials !== undefined,
      ctx.signal,
    );
    const revocations = await waitFor(roleserver.values.revocations, () => true, ctx.signal);
    // The latest etcd socket and directory, read when a request comes.
    let etcdSocket: string | undefined;
    let discovery: DiscoveryGroup[] | undefined;
    const followers = new Followers();
    followers.follow(roleserver.values.localControlPlane, (plane) => {
      etcdSocket = plane?.consensus.clientSocket;
    });
    followers.follow(roleserver.values.clusterDirectory, (directory) => {
      discovery = discoveryDocument(directory, config.ports.metrics);
    });
    try {
      await secureMetricsRunnable({
        host: config.address,
        port: config.ports.metrics,
        tls: credentialsPem(credentials!),
        identify: identifier(Buffer.from(credentials!.caCertificate), revocations),
        core: registries.core,
        node: registries.node,
        etcdSocket: () => etcdSocket,
        discovery: () => discovery,
      })(ctx);
    } finally {
      await followers.close();
    }
  };
  const root =
    (supervisor: () => Supervisor): Runnable =>
    async (ctx) => {
      ctx.run("enrolment", manager.run);
      ctx.run("roleserver", roleserver.run);
      ctx.run("metrics", secureMetrics);
      if (config.ports.plainMetrics !== undefined) {
        // Opt-in, unauthenticated: loopback only.
        ctx.run(
          "plainmetrics",
          metricsRunnable(
            [registries.core, registries.node],
            "127.0.0.1",
            config.ports.plainMetrics,
          ),
        );
      }
      ctx.run("nodemetrics", nodeMetrics);
      ctx.run("debug", async (debugCtx) => {
        // The debug service authenticates with the node certificate, so it
        // starts once the node has one.
        const { credentials } = await waitFor(
          manager.status,
          (s) => s.credentials !== undefined,
          debugCtx.signal,
        );
        const tls = credentialsPem(credentials!);
        // The certificates of deleted nodes are refused here too (roleserve's revocation worker).
        const revocations = await waitFor(
          roleserver.values.revocations,
          () => true,
          debugCtx.signal,
        );
        // The local etcd member's socket, read when NodeManagement.DefragmentMember comes.
        let etcdSocket: string | undefined;
        const followers = new Followers();
        followers.follow(roleserver.values.localControlPlane, (plane) => {
          etcdSocket = plane?.consensus.clientSocket;
        });
        try {
          await grpcServerRunnable(
            () => {
              // The same message size and stream limits as the curator's listener.
              const server = new Server(serverLimits());
              const identify = identifier(Buffer.from(credentials!.caCertificate), revocations);
              // Both services' long-lived streams are capped together.
              const streams = nodeStreams(debugCtx.signal);
              server.addService(
                api.DebugService,
                debugServer({
                  supervisor: supervisor(),
                  conditions,
                  identify,
                  signal: debugCtx.signal,
                  followStreams: streams,
                }),
              );
              server.addService(
                api.NodeManagementService,
                nodeManagementServer({
                  supervisor: supervisor(),
                  identify,
                  streams,
                  power,
                  etcdSocket: () => etcdSocket,
                  defragmentGate,
                }),
              );
              return server;
            },
            `${config.address}:${config.ports.debug}`,
            curatorServerCredentials(tls),
          )(debugCtx);
        } finally {
          await followers.close();
        }
      });
      ctx.healthy();
      await ctx.untilAborted();
    };
  return { manager, roleserver, root };
}
