/**
 * The node's NodeManagement service (metropolis.proto.api.NodeManagement,
 * Monogon's NodeManagement): what the cluster's owner asks of one node —
 * its logs, filtered (a DN exactly or with its subtree, a minimum severity,
 * leveled entries only or raw ones too, the last N of the backlog or all of
 * it, then streamed live), stopping it: Reboot or PowerOff, and
 * DefragmentMember, which defragments the node's own etcd member.
 *
 * Served on the Debug service's listener (same server, same mutual TLS, same
 * caller classification, same caps on long-lived streams, shared with
 * Debug's), but to the owner only: a node certificate is refused
 * PERMISSION_DENIED, since a node has no business rebooting another.
 *
 * Reboot and PowerOff answer first, then hand the request to `power` on the
 * next turn of the event loop; `metropolis-node` then stops its supervision
 * tree gracefully and exits with {@link rebootExitStatus} (which its service
 * manager restarts) or 0.
 *
 * DefragmentMember reaches the member over its unix client socket, which
 * only its node can (the curator leader's DefragmentConsensus reaches only
 * the leader's own member): one at a time and a minute apart per node
 * (DefragmentGate of @metropolis/curator, RESOURCE_EXHAUSTED otherwise),
 * FAILED_PRECONDITION when the node runs no member. The node does not know
 * the consensus: metroctl asks the curator leader's quorum check first
 * (CheckNodeMaintenance, DEFRAGMENT), as for Reboot.
 */
import {
  status,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServerWritableStream,
} from "@grpc/grpc-js";
import { defragmentMember, MemberMaintenanceError, memberClient } from "@metropolis/consensus";
import {
  BoundedStreams,
  CuratorError,
  DefragmentGate,
  FailedPreconditionError,
  InvalidArgumentError,
  PermissionDeniedError,
  requireAccess,
  UnauthenticatedError,
  type Caller,
} from "@metropolis/curator";
import { api } from "@metropolis/proto";
import type { LogEntry, Supervisor } from "@metropolis/supervisor";
import type { IdentifyCaller } from "./debug-service";
import {
  checkDnPrefix,
  dnMatches,
  serverStream,
  streamLogs,
  toApiLogEntry,
  toStatus,
} from "./log-stream";

/**
 * The exit status of `metropolis-node` after NodeManagement.Reboot: 75
 * (EX_TEMPFAIL, "try again"), which local-cluster (and a systemd unit with
 * `RestartForceExitStatus=75`) restarts with the same root and config.
 * PowerOff exits 0, like a stop by SIGTERM: the node stays stopped.
 */
export const rebootExitStatus = 75;

/** What the owner asked the node to do with itself. */
export type PowerAction = "reboot" | "poweroff";

export interface NodeManagementOptions {
  /** The node's supervision tree: its logs. */
  supervisor: Supervisor;
  /** Who is calling; see `identifier` in @metropolis/curator. */
  identify: IdentifyCaller;
  /** The node's long-lived streams, shared with its Debug service (`nodeStreams`). */
  streams: BoundedStreams;
  /** Called once a Reboot or PowerOff was answered; stops the node. */
  power: (action: PowerAction) => void;
  /**
   * The node's own etcd member's client socket (absolute path), read when a
   * DefragmentMember call comes; undefined while the node runs no member.
   */
  etcdSocket: () => string | undefined;
  /** One at a time, a minute apart. @default a DefragmentGate of its own */
  defragmentGate?: DefragmentGate;
}

/**
 * Refuses anyone but the owner of this cluster, or a scoped credential whose
 * role may call `method` (`NodeManagement.<Method>`, access-roles.ts).
 */
function requireOwnerOrAccess(caller: Caller, method: string): void {
  if (caller.kind === "anonymous") {
    throw new UnauthenticatedError(
      "the NodeManagement service needs an owner certificate of this cluster; none was presented",
    );
  }
  if (caller.kind === "node" || caller.kind === "ephemeral") {
    throw new PermissionDeniedError(
      `the NodeManagement service needs an owner certificate of this cluster, not an ${caller.kind} one`,
    );
  }
  requireAccess(caller, method);
}

/** Severity ranks of the leveled entries; any other level is a raw entry. */
const severityRanks: Record<string, number> = {
  debug: api.LogSeverity.DEBUG,
  info: api.LogSeverity.INFO,
  warn: api.LogSeverity.WARN,
  error: api.LogSeverity.ERROR,
};

/** Whether `level` is one of the leveled entries' (error, warn, info, debug). */
export function isLeveled(level: string): boolean {
  return Object.hasOwn(severityRanks, level);
}

/** The entry filter of a LogsRequest (every field but the backlog count and stream mode). */
export function logsFilter(
  req: Pick<api.LogsRequest, "dn" | "exact" | "minSeverity" | "leveledOnly">,
): (entry: LogEntry) => boolean {
  const min = req.minSeverity;
  return (entry) => {
    if (req.dn !== "" && (req.exact ? entry.dn !== req.dn : !dnMatches(req.dn, entry.dn))) {
      return false;
    }
    if (!isLeveled(entry.level)) return !req.leveledOnly;
    return severityRanks[entry.level] >= min;
  };
}

/** Logs: the matching backlog (its last `backlogCount`, or all), then, when streamed, new matching entries. */
async function logs(
  opts: NodeManagementOptions,
  call: ServerWritableStream<api.LogsRequest, api.LogsResponse>,
): Promise<void> {
  requireOwnerOrAccess(await opts.identify(call), "NodeManagement.Logs");
  if (call.cancelled) return;
  const req = call.request;
  checkDnPrefix(req.dn, "dn");
  if (!(req.minSeverity >= 0 && typeof api.LogSeverity[req.minSeverity] === "string")) {
    throw new InvalidArgumentError(`unknown min_severity ${req.minSeverity}`);
  }
  if (
    req.streamMode !== api.LogsRequest_StreamMode.UNSPECIFIED &&
    req.streamMode !== api.LogsRequest_StreamMode.STREAM
  ) {
    throw new InvalidArgumentError(`unknown stream_mode ${req.streamMode}`);
  }
  const matches = logsFilter(req);
  const backlog = (): api.LogEntry[] => {
    if (req.backlogCount === 0) return [];
    // Every DN is below the tree's root, so the whole tree's backlog is the root's.
    const prefix = req.dn === "" ? (opts.supervisor.tree()[0]?.dn ?? "") : req.dn;
    const all = opts.supervisor.logs(prefix).filter(matches);
    const kept = req.backlogCount === undefined ? all : all.slice(-req.backlogCount);
    return kept.map(toApiLogEntry);
  };
  await streamLogs(opts.supervisor, opts.streams, call, {
    backlog,
    matches,
    follow: req.streamMode === api.LogsRequest_StreamMode.STREAM,
  });
}

/** A unary call that the owner may make: answered by `answer`, then `after` runs. */
function ownerUnary<Req, Res>(
  opts: NodeManagementOptions,
  method: string,
  answer: () => Res,
  after: () => void,
): (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => void {
  return (call, callback) => {
    opts.identify(call).then(
      (caller) => {
        try {
          requireOwnerOrAccess(caller, `NodeManagement.${method}`);
        } catch (e) {
          callback(toStatus(e, method));
          return;
        }
        callback(null, answer());
        // The answer is on its way before the node begins to stop; stopping
        // shuts the server down gracefully, which lets it go out.
        setImmediate(after);
      },
      (e: unknown) => callback(toStatus(e, method)),
    );
  };
}

/** DefragmentMember: the node's own etcd member, through `gate`. */
async function defragment(
  opts: NodeManagementOptions,
  gate: DefragmentGate,
  call: ServerUnaryCall<api.DefragmentMemberRequest, api.DefragmentMemberResponse>,
): Promise<api.DefragmentMemberResponse> {
  requireOwnerOrAccess(await opts.identify(call), "NodeManagement.DefragmentMember");
  const socket = opts.etcdSocket();
  if (socket === undefined) {
    throw new FailedPreconditionError(
      "this node runs no etcd member (it does not hold the consensus role, or its member is not running now): there is nothing to defragment here",
    );
  }
  return gate.run(async () => {
    const client = memberClient(socket);
    try {
      return await defragmentMember(client);
    } catch (e) {
      if (e instanceof MemberMaintenanceError) {
        throw new CuratorError(status.UNAVAILABLE, `this node's etcd member: ${e.message}`);
      }
      throw e;
    } finally {
      client.close();
    }
  });
}

/**
 * The NodeManagement service's grpc-js handlers: every call first checks that
 * its caller presented the owner certificate of this cluster (or a scoped
 * credential whose role may call the method: access-roles.ts)
 * (UNAUTHENTICATED without one or with an untrusted one, PERMISSION_DENIED
 * for a node's or a registering node's).
 *
 * @example
 * server.addService(api.NodeManagementService, nodeManagementServer({
 *   supervisor, identify: identifier(caDer, revocations), streams, power,
 *   etcdSocket: () => plane?.consensus.clientSocket,
 * }));
 */
export function nodeManagementServer(opts: NodeManagementOptions): api.NodeManagementServer {
  const gate = opts.defragmentGate ?? new DefragmentGate();
  return {
    logs: serverStream("Logs", (call) => logs(opts, call)),
    reboot: ownerUnary<api.RebootRequest, api.RebootResponse>(
      opts,
      "Reboot",
      () => ({}),
      () => opts.power("reboot"),
    ),
    powerOff: ownerUnary<api.PowerOffRequest, api.PowerOffResponse>(
      opts,
      "PowerOff",
      () => ({}),
      () => opts.power("poweroff"),
    ),
    defragmentMember: (call, callback) => {
      defragment(opts, gate, call).then(
        (res) => callback(null, res),
        (e: unknown) => callback(toStatus(e, "DefragmentMember")),
      );
    },
  };
}
