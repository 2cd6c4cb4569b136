/**
 * The Curator gRPC service, served by the leading curator: the API nodes use
 * to watch the cluster, report their status and heartbeats, and to register,
 * commit and join. Watch is in curator-watch.ts, registration in
 * curator-registration.ts; this file checks requests, callers and assembles
 * the service.
 *
 * Who may call what (identity.ts classifies callers):
 * - node certificates: Watch, UpdateNodeStatus (own node), Heartbeat, GetConsensusStatus;
 * - self-signed (ephemeral) certificates: RegisterNode, CommitNode, JoinNode;
 * - the owner's certificate: nothing here (PERMISSION_DENIED); no certificate: UNAUTHENTICATED.
 */
import { isIP } from "node:net";
import { status, type ServerDuplexStream } from "@grpc/grpc-js";
import { api, curator, type common } from "@metropolis/proto";
import { quoted } from "./bounded-text";
import { CuratorError, InvalidArgumentError, PermissionDeniedError } from "./errors";
import { hasRole } from "./management-nodes";
import { claimAddress } from "./node-addresses";
import { serverStream, toGrpcError, unary } from "./grpc-handlers";
import { requireCurrentNode } from "./current-node";
import { requireNode, type Caller } from "./identity";
import { nodeKey } from "./keys";
import type { LeaderContext } from "./leader-context";
import { commitNode, joinNode, registerNode } from "./curator-registration";
import { watch } from "./curator-watch";
import { NodeRecordFeed } from "./node-record-feed";
import { watchRevocations } from "./curator-revocations";
import { encodeNode, getNode } from "./node-record";
import { consensusMembers } from "./consensus-members";
import { recordWipeAcknowledgement } from "./management-decommission";

/** Status fields are small; anything longer is a client bug, not data to store. */
const MAX_STATUS_STRING = 256;
/** Compare-and-swap attempts for a status update before answering ABORTED. */
const STATUS_ATTEMPTS = 5;

/** The Curator service implementation for `ctx`'s leadership. */
export function curatorServer(ctx: LeaderContext): curator.CuratorServer {
  const log = ctx.logger;
  // One per leadership, like the server: each node's watch of its own record follows it.
  const records = new NodeRecordFeed(ctx);
  return {
    watch: serverStream("Curator.Watch", log, (call) => watch(ctx, records, call)),
    updateNodeStatus: unary("Curator.UpdateNodeStatus", log, async (call) => {
      await updateNodeStatus(ctx, call.request, await ctx.identify(call));
      return {};
    }),
    heartbeat: (call) => heartbeat(ctx, call),
    registerNode: unary("Curator.RegisterNode", log, async (call) =>
      registerNode(ctx, await ctx.identify(call), call.request),
    ),
    commitNode: unary("Curator.CommitNode", log, async (call) =>
      commitNode(ctx, await ctx.identify(call), call.request),
    ),
    joinNode: unary("Curator.JoinNode", log, async (call) =>
      joinNode(ctx, await ctx.identify(call), call.request),
    ),
    getConsensusStatus: unary("Curator.GetConsensusStatus", log, async (call) => {
      await requireCurrentNode(ctx, call);
      return getConsensusStatus(ctx);
    }),
    watchRevocations: serverStream("Curator.WatchRevocations", log, (call) =>
      watchRevocations(ctx, call),
    ),
  };
}

/** Checks a reported status and returns what is stored: the request's fields, timestamped by us. */
export function checkNodeStatus(reported: common.NodeStatus | undefined): common.NodeStatus {
  if (!reported) throw new InvalidArgumentError("status must be set");
  // Sizes before content.
  for (const [name, value] of [
    ["external_address", reported.externalAddress],
    ["version", reported.version],
    ["boot_id", reported.bootId],
  ] as const) {
    if (value.length > MAX_STATUS_STRING) {
      throw new InvalidArgumentError(
        `${name} ${quoted(value)} is longer than ${MAX_STATUS_STRING} characters`,
      );
    }
  }
  if (isIP(reported.externalAddress) === 0) {
    throw new InvalidArgumentError(
      `external_address ${quoted(reported.externalAddress)} is not an IP address`,
    );
  }
  const port = reported.runningCurator?.port;
  if (port !== undefined && (port < 1 || port > 65535)) {
    throw new InvalidArgumentError(`running_curator.port ${port} is not a TCP port`);
  }
  // The node's clock is not trusted: the leader stamps when it heard this.
  return { ...reported, timestamp: new Date() };
}

async function updateNodeStatus(
  ctx: LeaderContext,
  req: curator.UpdateNodeStatusRequest,
  caller: Caller,
): Promise<void> {
  // Authorization first, so a foreign node learns nothing from validation errors.
  requireNode(caller, req.nodeId);
  const nodeStatus = checkNodeStatus(req.status);
  for (let i = 0; i < STATUS_ATTEMPTS; i++) {
    const found = await getNode(ctx.kv, req.nodeId);
    // Clients dial whoever says it runs a curator: only the cluster's consensus members may.
    if (nodeStatus.runningCurator && !hasRole(found.node.roles, api.NodeRole.CONSENSUS_MEMBER)) {
      throw new PermissionDeniedError(
        `node ${found.id} is not a consensus member: only consensus members run curators, so it may not report running_curator`,
      );
    }
    const txn = ctx.leadership.txn().and(nodeKey(found.id), "Mod", "==", found.modRevision);
    const claim = await claimAddress(
      ctx.kv,
      txn,
      found.id,
      nodeStatus.externalAddress,
      found.node.status?.externalAddress || undefined,
    );
    txn.then(
      ctx.kv.put(nodeKey(found.id)).value(encodeNode({ ...found.node, status: nodeStatus })),
      ...claim,
    );
    if (await ctx.leadership.commit(txn)) return;
  }
  throw new CuratorError(
    status.ABORTED,
    `status of ${req.nodeId} changed concurrently ${STATUS_ATTEMPTS} times; retry`,
  );
}

/**
 * Heartbeat: each request is a heartbeat of the calling node, answered with
 * its health (HEALTHY, since it just beat). The caller is checked once, when
 * the stream opens; the stream ends when the client ends or cancels it.
 *
 * A heartbeat carrying `wipe_acknowledged` is answered only once the node's
 * record holds the acknowledgement (recordWipeAcknowledgement, a guarded
 * write): the answer is the node's word that the cluster has it, on which
 * it goes on to wipe itself, and the record is where any leader finds it.
 * Answers go out in the order of the heartbeats.
 */
function heartbeat(
  ctx: LeaderContext,
  call: ServerDuplexStream<curator.HeartbeatRequest, curator.HeartbeatResponse>,
): void {
  const fail = (e: unknown) => call.emit("error", toGrpcError(e, ctx.logger, "Curator.Heartbeat"));
  // A deleted node must not be kept "healthy".
  const authorized = requireCurrentNode(ctx, call);
  authorized.catch(fail);
  /** The answer to the previous heartbeat: the next one's goes out after it. */
  let answered: Promise<void> = Promise.resolve();
  const answer = async (nodeId: string, req: curator.HeartbeatRequest) => {
    if (req.wipeAcknowledged) {
      try {
        await ctx.heartbeats.wipes.record(nodeId, () => recordWipeAcknowledgement(ctx, nodeId));
      } catch (e) {
        // Not answered: the node repeats the acknowledgement on its next stream.
        fail(e);
        return;
      }
    }
    if (!call.cancelled && call.writable) call.write({ health: ctx.heartbeats.health(nodeId) });
  };
  call.on("data", (req: curator.HeartbeatRequest) => {
    authorized.then(
      (nodeId) => {
        // Past the lease deadline this is no leader's answer: end the stream (the node asks again).
        try {
          ctx.leadership.assertServing();
        } catch (e) {
          return fail(e);
        }
        // At its receipt, whatever the answer waits for.
        ctx.heartbeats.beat(nodeId);
        // Its wall clock, for the health check only (clock-samples.ts).
        ctx.clocks.record(nodeId, req.sentAt, req.previousRoundTripMs ?? 0);
        ctx.consensusViews.record(nodeId, req.consensusView);
        answered = answered.then(() => answer(nodeId, req));
      },
      () => undefined, // already answered by fail()
    );
  });
  call.on("end", () => {
    authorized.then(
      () => answered.then(() => call.end()),
      () => undefined,
    );
  });
  call.on("error", () => undefined); // a client reset is not our error
}

async function getConsensusStatus(ctx: LeaderContext): Promise<curator.GetConsensusStatusResponse> {
  return { members: await consensusMembers(ctx) };
}
