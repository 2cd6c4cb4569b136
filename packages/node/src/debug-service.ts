/**
 * The node's Debug service (metropolis.proto.api.Debug): what a test or an
 * operator asks a running node to find out what it is doing without a log
 * collector — its log tree (backlog, then followed live), its supervision
 * tree (a snapshot, or watched live), its supervisor reports (kept ones,
 * then followed live), and whether its startup conditions hold.
 *
 * It is served with the node's own certificate over the same
 * "request, don't verify" mutual TLS as the curator (`curatorServerCredentials`),
 * and each call classifies its caller itself: only the cluster's nodes and its
 * owner may look inside a node, since logs can carry anything a runnable
 * said. A registering node's self-signed certificate or no certificate at
 * all is refused.
 *
 * Bounded like every server of the node core (server-limits.ts in
 * @metropolis/curator): a DN prefix longer than {@link maxDnPrefixLength} is
 * refused before it is used, errors quote client values cut short, and
 * long-lived streams (followed GetLogs and GetSupervisorReports,
 * WatchSupervisionTree) are capped together ({@link maxFollowStreamsPerConnection},
 * {@link maxFollowStreams}) and ended through one listener on the service's
 * signal, not one each.
 */
import type { sendUnaryData, ServerUnaryCall, ServerWritableStream } from "@grpc/grpc-js";
import {
  BoundedStreams,
  InvalidArgumentError,
  PermissionDeniedError,
  requireAccess,
  UnauthenticatedError,
  type Caller,
} from "@metropolis/curator";
import { api } from "@metropolis/proto";
import type {
  NodeState,
  NodeStatus,
  ReportError,
  Supervisor,
  SupervisorReport,
  SupervisorReportKind,
} from "@metropolis/supervisor";
import {
  checkDnPrefix,
  dnMatches,
  maxLogEntriesPerResponse,
  serverStream,
  streamLogs,
  toApiLogEntry,
  toStatus,
} from "./log-stream";

// Kept importable from here, where they were first defined.
export {
  dnMatches,
  LogFollowOverflowError,
  maxDnPrefixLength,
  maxLogBatchBytes,
  maxLogEntriesPerResponse,
  maxPendingFollowedEntries,
  toApiLogEntry,
} from "./log-stream";

/** The TCP port a node serves its Debug service on. */
export const defaultDebugPort = 7837;

/**
 * Followed GetLogs streams one connection may have open at once. Each may
 * hold up to {@link maxPendingFollowedEntries} entries for a slow reader, so
 * they are capped although only nodes and the owner may open them; an
 * operator follows a few subtrees at a time.
 */
export const maxFollowStreamsPerConnection = 16;

/** Followed GetLogs streams the service may have open at once, from everyone. */
export const maxFollowStreams = 64;

/**
 * The node's long-lived gRPC streams (Debug's followed GetLogs and
 * GetSupervisorReports and WatchSupervisionTree, NodeManagement's streamed
 * Logs), capped together at {@link maxFollowStreamsPerConnection} and
 * {@link maxFollowStreams}, all ended when `signal` aborts.
 */
export function nodeStreams(signal?: AbortSignal): BoundedStreams {
  return new BoundedStreams(
    "long-lived Debug/NodeManagement",
    { perConnection: maxFollowStreamsPerConnection, total: maxFollowStreams },
    signal,
  );
}

/**
 * Most reports that wait for a slow GetSupervisorReports reader (with
 * follow). Past it the oldest waiting one is dropped, and the next report
 * sent says in `dropped` how many were.
 */
export const maxPendingFollowedReports = 1000;

/** Whether a startup condition holds, and optionally why not. */
export interface ConditionResult {
  ok: boolean;
  detail?: string;
}

/**
 * Answers for the node's startup conditions. Called only with a known
 * condition (never UNSPECIFIED). May be async (e.g. to probe a connection);
 * a throw is answered INTERNAL with its message.
 */
export type ConditionSource = (
  condition: api.Condition,
) => ConditionResult | Promise<ConditionResult>;

/** Classifies the caller of a gRPC call, e.g. `identifier(caDer)` from @metropolis/curator. */
export type IdentifyCaller = (
  call: Pick<ServerUnaryCall<unknown, unknown>, "getAuthContext">,
) => Promise<Caller>;

export interface DebugServerOptions {
  /** The node's supervision tree: its logs and its snapshot. */
  supervisor: Supervisor;
  /** The node's startup conditions. */
  conditions: ConditionSource;
  /** Who is calling; see `identifier` in @metropolis/curator. */
  identify: IdentifyCaller;
  /**
   * When it aborts, open long-lived streams (followed GetLogs and
   * GetSupervisorReports, WatchSupervisionTree) end (status OK), so that a
   * graceful server shutdown is not held up by a client that follows.
   */
  signal?: AbortSignal;
  /**
   * The long-lived streams (followed GetLogs and GetSupervisorReports,
   * WatchSupervisionTree), capped together. Default: capped at
   * {@link maxFollowStreamsPerConnection} and {@link maxFollowStreams},
   * ended by `signal`. A test passes its own to set other caps.
   */
  followStreams?: BoundedStreams;
}

/**
 * Refuses anyone but a node of this cluster, the owner, or a scoped
 * credential whose role may call `method` (`Debug.<Method>`, access-roles.ts).
 */
function requireNodeOrAccess(caller: Caller, method: string): void {
  if (caller.kind === "node") return;
  if (caller.kind === "anonymous") {
    throw new UnauthenticatedError(
      "the Debug service needs a node or owner certificate of this cluster; none was presented",
    );
  }
  if (caller.kind === "ephemeral") {
    throw new PermissionDeniedError(
      `the Debug service needs a node or owner certificate of this cluster, not an ${caller.kind} one`,
    );
  }
  requireAccess(caller, method);
}

const runnableStates: Record<NodeState, api.RunnableState> = {
  new: api.RunnableState.NEW,
  healthy: api.RunnableState.HEALTHY,
  done: api.RunnableState.DONE,
  dead: api.RunnableState.DEAD,
  canceled: api.RunnableState.CANCELED,
};

/** One node of `Supervisor.tree()` as the wire's SupervisionNode. */
export function toSupervisionNode(n: NodeStatus): api.SupervisionNode {
  return {
    dn: n.dn,
    state: runnableStates[n.state] ?? api.RunnableState.UNSPECIFIED,
    restarts: n.restarts,
    since: new Date(n.since),
    lastError: n.lastError ?? "",
    nextRestartInMs: n.nextRestartInMs,
    givenUp: n.givenUp ?? false,
    status: n.status ?? "",
  };
}

/** The last `tail` entries (all when unset) of `dnPrefix`'s subtree; the whole tree's for "". */
function backlog(
  supervisor: Supervisor,
  dnPrefix: string,
  tail: number | undefined,
): api.LogEntry[] {
  // Every DN is below the tree's root, so the whole tree's backlog is the root's.
  const prefix = dnPrefix === "" ? (supervisor.tree()[0]?.dn ?? "") : dnPrefix;
  return supervisor.logs(prefix, tail === undefined ? {} : { tail }).map(toApiLogEntry);
}

/**
 * GetLogs: the backlog of the DN prefix's subtree (its last `tail` entries),
 * then, with `follow`, every new matching entry until the client cancels or
 * the follow streams end (`signal` aborts).
 */
async function getLogs(
  opts: DebugServerOptions,
  followStreams: BoundedStreams,
  call: ServerWritableStream<api.GetLogsRequest, api.GetLogsResponse>,
): Promise<void> {
  requireNodeOrAccess(await opts.identify(call), "Debug.GetLogs");
  if (call.cancelled) return;
  const { dnPrefix, tail, follow } = call.request;
  checkDnPrefix(dnPrefix, "dn_prefix");
  await streamLogs(opts.supervisor, followStreams, call, {
    backlog: () => backlog(opts.supervisor, dnPrefix, tail),
    matches: (entry) => dnMatches(dnPrefix, entry.dn),
    follow,
  });
}

const reportKinds: Record<SupervisorReportKind, api.SupervisorReportKind> = {
  started: api.SupervisorReportKind.STARTED,
  healthy: api.SupervisorReportKind.HEALTHY,
  done: api.SupervisorReportKind.DONE,
  died: api.SupervisorReportKind.DIED,
  restartScheduled: api.SupervisorReportKind.RESTART_SCHEDULED,
  givenUp: api.SupervisorReportKind.GIVEN_UP,
  escalated: api.SupervisorReportKind.ESCALATED,
};

function toApiReportError(e: ReportError | undefined): api.ReportError | undefined {
  return e && { name: e.name, message: e.message, stack: e.stack ?? "" };
}

/** One supervisor report as the wire's SupervisorReport. */
export function toApiReport(r: SupervisorReport): api.SupervisorReport {
  return {
    seq: r.seq,
    dn: r.dn,
    time: new Date(r.time),
    kind: reportKinds[r.kind] ?? api.SupervisorReportKind.UNSPECIFIED,
    restarts: r.kind === "started" ? r.restarts : 0,
    error: "error" in r ? toApiReportError(r.error) : undefined,
    delayMs: r.kind === "restartScheduled" ? r.delayMs : 0,
    attempt: r.kind === "restartScheduled" ? r.attempt : 0,
    maxRestarts: r.kind === "givenUp" ? r.maxRestarts : 0,
    periodMs: r.kind === "givenUp" ? r.periodMs : 0,
    escalatedTo: r.kind === "escalated" ? (r.to ?? "") : "",
    dropped: r.dropped ?? 0,
  };
}

/** A server stream that can be written to with backpressure. */
type WritableCall<T> = ServerWritableStream<unknown, T>;

/**
 * Writes `message`; when the stream refuses more (backpressure), resolves
 * only once it drained, the client is gone, or `ended` aborted.
 */
function writeAndWait<T>(call: WritableCall<T>, message: T, ended?: AbortSignal): Promise<void> {
  if (call.cancelled || call.writableEnded) return Promise.resolve();
  if (call.write(message)) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      call.removeListener("drain", done);
      call.removeListener("cancelled", done);
      ended?.removeEventListener("abort", done);
      resolve();
    };
    call.once("drain", done);
    call.once("cancelled", done);
    ended?.addEventListener("abort", done, { once: true });
    if (ended?.aborted) done();
  });
}

/**
 * Writes what `it` yields (each mapped by `toMessage`) until it ends, the
 * client is gone or `ended` aborts; the iterator waits while the stream
 * drains (it is bounded itself: it drops or coalesces).
 */
async function pump<T, M>(
  it: AsyncIterableIterator<T>,
  call: WritableCall<M>,
  ended: AbortSignal,
  toMessage: (item: T) => M,
): Promise<void> {
  const stop = () => void it.return?.();
  ended.addEventListener("abort", stop, { once: true });
  if (ended.aborted) stop();
  try {
    for (;;) {
      const next = await it.next();
      if (next.done || ended.aborted || call.cancelled) break;
      await writeAndWait(call, toMessage(next.value), ended);
    }
  } finally {
    ended.removeEventListener("abort", stop);
    await it.return?.();
  }
}

/**
 * GetSupervisorReports: the kept reports of the DN prefix's subtree (its
 * last `backlog`), then, with `follow`, every new matching report until the
 * client cancels, the tree ends, or the long-lived streams end.
 */
async function getSupervisorReports(
  opts: DebugServerOptions,
  streams: BoundedStreams,
  call: ServerWritableStream<api.GetSupervisorReportsRequest, api.GetSupervisorReportsResponse>,
): Promise<void> {
  requireNodeOrAccess(await opts.identify(call), "Debug.GetSupervisorReports");
  if (call.cancelled) return;
  const { dnPrefix, backlog, follow } = call.request;
  checkDnPrefix(dnPrefix, "dn_prefix");
  const wcall = call as WritableCall<api.GetSupervisorReportsResponse>;
  if (!follow) {
    const reports = opts.supervisor.recentReports({ dnPrefix, tail: backlog }).map(toApiReport);
    for (let i = 0; i < reports.length && !call.cancelled; i += maxLogEntriesPerResponse) {
      await writeAndWait(wcall, { reports: reports.slice(i, i + maxLogEntriesPerResponse) });
    }
    return;
  }
  await streams.serve(call, (ended) =>
    pump(
      opts.supervisor.reports({
        history: backlog ?? true,
        dnPrefix,
        bufferSize: maxPendingFollowedReports,
      }),
      wcall,
      ended,
      (r) => ({ reports: [toApiReport(r)] }),
    ),
  );
}

/** WatchSupervisionTree: the tree now, then after every change (coalesced), until it ends. */
async function watchSupervisionTree(
  opts: DebugServerOptions,
  streams: BoundedStreams,
  call: ServerWritableStream<api.WatchSupervisionTreeRequest, api.WatchSupervisionTreeResponse>,
): Promise<void> {
  requireNodeOrAccess(await opts.identify(call), "Debug.WatchSupervisionTree");
  if (call.cancelled) return;
  await streams.serve(call, (ended) =>
    pump(
      opts.supervisor.watchTree(),
      call as WritableCall<api.WatchSupervisionTreeResponse>,
      ended,
      (nodes) => ({ nodes: nodes.map(toSupervisionNode) }),
    ),
  );
}

/**
 * The Debug service's grpc-js handlers. Every call first checks that its
 * caller presented a node or owner certificate of this cluster, or a scoped
 * credential whose role may call the method (access-roles.ts in @metropolis/curator)
 * (UNAUTHENTICATED without one or with an untrusted one, PERMISSION_DENIED
 * for a registering node's self-signed one).
 *
 * @example
 * server.addService(api.DebugService, debugServer({
 *   supervisor, conditions, identify: identifier(caDer), signal: ctx.signal,
 * }));
 */
export function debugServer(opts: DebugServerOptions): api.DebugServer {
  const followStreams = opts.followStreams ?? nodeStreams(opts.signal);
  return {
    getLogs: serverStream("GetLogs", (call) => getLogs(opts, followStreams, call)),

    getSupervisionTree(
      call: ServerUnaryCall<api.GetSupervisionTreeRequest, api.GetSupervisionTreeResponse>,
      callback: sendUnaryData<api.GetSupervisionTreeResponse>,
    ): void {
      opts
        .identify(call)
        .then((caller) => {
          requireNodeOrAccess(caller, "Debug.GetSupervisionTree");
          return { nodes: opts.supervisor.tree().map(toSupervisionNode) };
        })
        .then(
          (res) => callback(null, res),
          (e: unknown) => callback(toStatus(e, "GetSupervisionTree")),
        );
    },

    getCondition(
      call: ServerUnaryCall<api.GetConditionRequest, api.GetConditionResponse>,
      callback: sendUnaryData<api.GetConditionResponse>,
    ): void {
      const check = async (): Promise<api.GetConditionResponse> => {
        requireNodeOrAccess(await opts.identify(call), "Debug.GetCondition");
        const condition = call.request.condition;
        // Known conditions are the enum's named, positive values.
        if (!(condition > 0 && typeof api.Condition[condition] === "string")) {
          throw new InvalidArgumentError(
            condition === api.Condition.UNSPECIFIED
              ? "condition is unset"
              : `unknown condition ${condition}`,
          );
        }
        const result = await opts.conditions(condition);
        return { ok: result.ok, detail: result.detail ?? "" };
      };
      check().then(
        (res) => callback(null, res),
        (e: unknown) => callback(toStatus(e, "GetCondition")),
      );
    },

    watchSupervisionTree: serverStream("WatchSupervisionTree", (call) =>
      watchSupervisionTree(opts, followStreams, call),
    ),

    getSupervisorReports: serverStream("GetSupervisorReports", (call) =>
      getSupervisorReports(opts, followStreams, call),
    ),
  };
}
