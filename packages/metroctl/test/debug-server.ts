/**
 * A node's Debug service for metroctl's tests of `logs`, `tree` and `reports`. The real
 * one belongs to packages/node; this one serves the same gRPC service over
 * the same real mTLS — a node certificate from the cluster CA, the owner
 * certificate required of callers — with handlers each test writes, so the
 * tests see exactly what metroctl asked for and how it ended the call.
 */
import { Server, status, type ServerWritableStream } from "@grpc/grpc-js";
import { freePort } from "@metropolis/consensus/testing";
import { curatorServerCredentials, identifier, requireOwner } from "@metropolis/curator";
import { tlsMaterial } from "@metropolis/pki";
import { api } from "@metropolis/proto";
import type { LeaderFixture } from "@metropolis/curator/testing";

export interface DebugHandlers {
  logs?: (call: ServerWritableStream<api.GetLogsRequest, api.GetLogsResponse>) => Promise<void>;
  tree?: () => api.GetSupervisionTreeResponse;
  watch?: (
    call: ServerWritableStream<api.WatchSupervisionTreeRequest, api.WatchSupervisionTreeResponse>,
  ) => Promise<void>;
  reports?: (
    call: ServerWritableStream<api.GetSupervisorReportsRequest, api.GetSupervisorReportsResponse>,
  ) => Promise<void>;
}

export interface DebugServer {
  host: string;
  port: number;
  /** Requests of GetLogs, in order. */
  logRequests: api.GetLogsRequest[];
  /** Requests of GetSupervisorReports, in order. */
  reportRequests: api.GetSupervisorReportsRequest[];
  /** Kinds of callers seen ("owner", …). */
  callers: string[];
  stop(): void;
}

/**
 * Serves Debug on a random 127.0.0.x and free port, presenting the node
 * certificate of `as` (default: the cluster's first node).
 */
export async function startDebugServer(
  leader: LeaderFixture,
  handlers: DebugHandlers,
  as: { certificate: Uint8Array; privateKey: Uint8Array } = leader.firstNode,
): Promise<DebugServer> {
  const host = `127.0.0.${2 + Math.floor(Math.random() * 250)}`;
  const port = await freePort(host);
  const identify = identifier(leader.caCertificate);
  const logRequests: api.GetLogsRequest[] = [];
  const reportRequests: api.GetSupervisorReportsRequest[] = [];
  const callers: string[] = [];
  const checkOwner = async (call: Parameters<typeof identify>[0]) => {
    const caller = await identify(call);
    callers.push(caller.kind);
    requireOwner(caller);
  };
  const denied = (e: unknown) => ({
    code: status.PERMISSION_DENIED,
    details: e instanceof Error ? e.message : String(e),
  });
  const impl: api.DebugServer = {
    getLogs: (call) => {
      logRequests.push(call.request);
      checkOwner(call)
        .then(() => handlers.logs?.(call))
        .then(
          () => call.end(),
          (e: unknown) => call.emit("error", denied(e)),
        );
    },
    getSupervisionTree: (call, callback) => {
      checkOwner(call).then(
        () => callback(null, handlers.tree?.() ?? { nodes: [] }),
        (e: unknown) => callback(denied(e)),
      );
    },
    getCondition: (_call, callback) => callback({ code: status.UNIMPLEMENTED }),
    watchSupervisionTree: (call) => {
      checkOwner(call)
        .then(() => handlers.watch?.(call))
        .then(
          () => call.end(),
          (e: unknown) => call.emit("error", denied(e)),
        );
    },
    getSupervisorReports: (call) => {
      reportRequests.push(call.request);
      checkOwner(call)
        .then(() => handlers.reports?.(call))
        .then(
          () => call.end(),
          (e: unknown) => call.emit("error", denied(e)),
        );
    },
  };
  const server = new Server();
  server.addService(api.DebugService, impl);
  const tls = tlsMaterial({
    certificate: as.certificate,
    privateKey: as.privateKey,
    ca: leader.caCertificate,
  });
  await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${port}`, curatorServerCredentials(tls), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  return { host, port, logRequests, reportRequests, callers, stop: () => server.forceShutdown() };
}

/** A log entry at second `seconds` of a fixed minute, as the stand-in servers send them. */
export const logEntry = (
  seconds: number,
  level: string,
  dn: string,
  message: string,
  metaJson = "",
) => ({
  time: new Date(Date.UTC(2024, 4, 1, 12, 0, seconds)),
  level,
  dn,
  message,
  metaJson,
});
