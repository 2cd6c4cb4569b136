/**
 * A session with the cluster's curator leader: a CuratorConnection (which
 * finds and follows the leader) with promise-returning Management and AAA
 * calls, each with a deadline and cancelled when the operator interrupts.
 */
import {
  credentials,
  Metadata,
  type CallOptions,
  type ClientReadableStream,
  type ClientUnaryCall,
  type ServiceError,
} from "@grpc/grpc-js";
import { CuratorConnection, type LeaderClients } from "@metropolis/curator";
import { access, api } from "@metropolis/proto";
import { answerDeadline } from "@metropolis/supervisor";
import type { CommandContext } from "./command-context";
import { formatEndpoint } from "./endpoints";
import { ConfigFileError, NodeNotFoundError, StreamNotAcceptedError } from "./errors";
import { configFiles } from "./config-dir";
import { withProgress } from "./spinner";

/** How long a call may take before a spinner says what metroctl waits for. */
const progressDelayMs = 500;

type Callback<Res> = (err: ServiceError | null, res: Res) => void;

/** Issues one unary call on a leader's clients; returns the grpc-js call so it can be cancelled. */
type Invoke<Res> = (
  leader: LeaderClients,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: Callback<Res>,
) => ClientUnaryCall;

export class ClusterSession {
  private constructor(
    private readonly ctx: CommandContext,
    private readonly connection: CuratorConnection,
    private readonly endpoints: readonly string[],
  ) {}

  /** A session with explicit TLS material: the CA to trust and the client identity to present. */
  static async connect(
    ctx: CommandContext,
    tls: { ca: string; identity: { cert: string; key: string } },
  ): Promise<ClusterSession> {
    // Addresses the operator vouches for: any node of the cluster there may say who leads,
    // and the leader it names is then dialled expecting that leader's own certificate.
    const endpoints = await ctx.endpoints();
    return new ClusterSession(
      ctx,
      new CuratorConnection({ endpoints, ca: tls.ca, identity: tls.identity }),
      endpoints.map(formatEndpoint),
    );
  }

  /** A session as the cluster owner, with the credentials takeownership stored. */
  static async asOwner(ctx: CommandContext): Promise<ClusterSession> {
    const credentials = await ctx.configDir.readOwnerCredentials();
    if (!credentials) {
      throw new ConfigFileError(
        ctx.configDir.path(configFiles.ownerCertificate),
        "no owner certificate: run `metroctl takeownership` first",
      );
    }
    return ClusterSession.connect(ctx, {
      ca: credentials.ca,
      identity: { cert: credentials.cert, key: credentials.key },
    });
  }

  /**
   * Runs one unary call on the leader, within `timeoutMs` (default: the dial
   * timeout) for finding the leader and for the call itself.
   */
  private call<Res>(invoke: Invoke<Res>, timeoutMs = this.ctx.dialTimeoutMs): Promise<Res> {
    const deadline = Date.now() + timeoutMs;
    const signal = this.ctx.signal;
    // Reaching an unreachable cluster takes the whole dial timeout: say so, unless it is quick.
    return withProgress(
      this.ctx.io.stderr,
      `reaching the curator leader through ${this.endpoints.join(", ")}`,
      () => this.callLeader(invoke, deadline, timeoutMs, signal),
      { delayMs: progressDelayMs },
    );
  }

  private callLeader<Res>(
    invoke: Invoke<Res>,
    deadline: number,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<Res> {
    return this.connection.call(
      async (leader) => {
        await this.ctx.rememberEndpoints();
        return new Promise<Res>((resolve, reject) => {
          const call = invoke(leader, new Metadata(), { deadline }, (err, res) => {
            signal?.removeEventListener("abort", cancel);
            if (err) reject(err);
            else resolve(res);
          });
          const cancel = () => call.cancel();
          signal?.addEventListener("abort", cancel, { once: true });
        });
      },
      { timeoutMs, signal },
    );
  }

  getNodes(req: Partial<api.GetNodesRequest> = {}, timeoutMs?: number): Promise<api.Node[]> {
    return this.call<api.GetNodesResponse>(
      (l, m, o, cb) => l.management.getNodes(api.GetNodesRequest.fromPartial(req), m, o, cb),
      timeoutMs,
    ).then((res) => res.nodes);
  }

  /**
   * Opens a Management.WatchNodes stream on the leader; see {@link openStream}.
   */
  watchNodes(
    req: api.WatchNodesRequest,
    signal: AbortSignal,
  ): Promise<{ leaderId: string; stream: ClientReadableStream<api.WatchNodesResponse> }> {
    return this.openStream(
      "Management.WatchNodes",
      (leader) => leader.management.watchNodes(req, new Metadata(), {}),
      signal,
    );
  }

  /**
   * Opens a Management.WatchClusterConsensus stream on the leader; see {@link openStream}.
   */
  watchClusterConsensus(signal: AbortSignal): Promise<{
    leaderId: string;
    stream: ClientReadableStream<api.WatchClusterConsensusResponse>;
  }> {
    return this.openStream(
      "Management.WatchClusterConsensus",
      (leader) => leader.management.watchClusterConsensus({}, new Metadata(), {}),
      signal,
    );
  }

  /**
   * Opens a Management.BackupCluster stream on the leader; see {@link openStream}.
   */
  backupCluster(signal: AbortSignal): Promise<{
    leaderId: string;
    stream: ClientReadableStream<api.BackupClusterResponse>;
  }> {
    return this.openStream(
      "Management.BackupCluster",
      (leader) => leader.management.backupCluster({}, new Metadata(), {}),
      signal,
    );
  }

  /**
   * Opens a server stream on the leader (found within the dial timeout, and
   * found again while it answers UNAVAILABLE), and resolves once the leader
   * has accepted it (its response headers came), with the leader's node ID.
   * The stream has no deadline: it runs until `signal` aborts (cancelling
   * it), the leader ends it (it stopped leading), or it fails; the caller
   * reads it and watches again.
   *
   * Being accepted has one, the dial timeout: a leader whose process hangs
   * keeps its connection open, and the stream waited there until the HTTP/2
   * keepalive failed (up to 30 s), or for good on a connection dialled to it
   * afterwards (grpc-js puts no timeout on the TLS handshake). Then the
   * stream is cancelled, the leader given up as unresponsive (the next
   * attempt asks the curators who leads), and it fails with
   * {@link StreamNotAcceptedError}.
   */
  private async openStream<T>(
    method: string,
    open: (leader: LeaderClients) => ClientReadableStream<T>,
    signal: AbortSignal,
  ): Promise<{ leaderId: string; stream: ClientReadableStream<T> }> {
    const timeoutMs = this.ctx.dialTimeoutMs;
    return this.connection.call(
      async (leader) => {
        await this.ctx.rememberEndpoints();
        const stream = open(leader);
        const cancel = () => stream.cancel();
        signal.addEventListener("abort", cancel, { once: true });
        stream.once("close", () => signal.removeEventListener("abort", cancel));
        const notAccepted = answerDeadline(
          timeoutMs,
          () => new StreamNotAcceptedError(method, leader.endpoint.nodeId, timeoutMs),
        );
        try {
          // A refusal (or a follower's UNIMPLEMENTED) comes as an error without
          // headers: the connection then decides whether to find the leader again.
          await new Promise<void>((resolve, reject) => {
            const accepted = () => {
              stream.removeListener("error", refused);
              resolve();
            };
            const refused = (e: ServiceError) => {
              stream.removeListener("metadata", accepted);
              reject(e);
            };
            stream.once("metadata", accepted);
            stream.once("error", refused);
            notAccepted.signal.addEventListener("abort", () => reject(notAccepted.signal.reason), {
              once: true,
            });
          });
        } catch (e) {
          if (e instanceof StreamNotAcceptedError) {
            // Its CANCELLED error is the one `refused` above still listens for.
            stream.cancel();
            this.connection.leaderUnresponsive(leader, e);
          }
          throw e;
        } finally {
          notAccepted.clear();
        }
        return { leaderId: leader.endpoint.nodeId, stream };
      },
      { timeoutMs, signal },
    );
  }

  /** Node `id`; {@link NodeNotFoundError} when the cluster has no such node. */
  async getNode(id: string): Promise<api.Node> {
    const node = (await this.getNodes()).find((n) => n.id === id);
    if (!node) throw new NodeNotFoundError(id);
    return node;
  }

  /**
   * The node ID of the curator leader this session talks to. The connection
   * learned it from CuratorLocal.GetCurrentLeader of a curator it trusts, and
   * the leader proved it with its own node certificate; after a call, asking
   * costs no further round trip.
   */
  async leaderId(): Promise<string> {
    return (await this.connection.leader(this.ctx.dialTimeoutMs)).nodeId;
  }

  /** The etcd members and the curator leader with its term (Management.GetClusterConsensus). */
  getClusterConsensus(): Promise<api.GetClusterConsensusResponse> {
    return this.call((l, m, o, cb) => l.management.getClusterConsensus({}, m, o, cb));
  }

  getClusterInfo(): Promise<api.GetClusterInfoResponse> {
    return this.call((l, m, o, cb) => l.management.getClusterInfo({}, m, o, cb));
  }

  getRegisterTicket(): Promise<Buffer> {
    return this.call<api.GetRegisterTicketResponse>((l, m, o, cb) =>
      l.management.getRegisterTicket({}, m, o, cb),
    ).then((res) => res.ticket);
  }

  async approveNode(id: string): Promise<void> {
    await this.call((l, m, o, cb) =>
      l.management.approveNode({ node: { $case: "id", id } }, m, o, cb),
    );
  }

  async updateNodeRoles(req: api.UpdateNodeRolesRequest): Promise<void> {
    await this.call((l, m, o, cb) => l.management.updateNodeRoles(req, m, o, cb));
  }

  async updateNodeLabels(req: api.UpdateNodeLabelsRequest): Promise<void> {
    await this.call((l, m, o, cb) => l.management.updateNodeLabels(req, m, o, cb));
  }

  async deleteNode(req: api.DeleteNodeRequest): Promise<void> {
    await this.call((l, m, o, cb) => l.management.deleteNode(req, m, o, cb));
  }

  configureCluster(req: api.ConfigureClusterRequest): Promise<api.ConfigureClusterResponse> {
    return this.call((l, m, o, cb) => l.management.configureCluster(req, m, o, cb));
  }

  rotateClusterSecretsKey(): Promise<api.RotateClusterSecretsKeyResponse> {
    return this.call((l, m, o, cb) => l.management.rotateClusterSecretsKey({}, m, o, cb));
  }

  /** Whether an action on a node keeps a quorum of healthy voters (FAILED_PRECONDITION otherwise). */
  checkNodeMaintenance(
    req: api.CheckNodeMaintenanceRequest,
  ): Promise<api.CheckNodeMaintenanceResponse> {
    return this.call((l, m, o, cb) => l.management.checkNodeMaintenance(req, m, o, cb));
  }

  /** DecommissionNode, within `timeoutMs` (it waits for etcd to remove the node's member). */
  decommissionNode(
    req: api.DecommissionNodeRequest,
    timeoutMs?: number,
  ): Promise<api.DecommissionNodeResponse> {
    return this.call((l, m, o, cb) => l.management.decommissionNode(req, m, o, cb), timeoutMs);
  }

  /** RemoveConsensusMember, within `timeoutMs`. */
  removeConsensusMember(
    req: api.RemoveConsensusMemberRequest,
    timeoutMs?: number,
  ): Promise<api.RemoveConsensusMemberResponse> {
    return this.call((l, m, o, cb) => l.management.removeConsensusMember(req, m, o, cb), timeoutMs);
  }

  moveConsensusLeader(
    req: api.MoveConsensusLeaderRequest,
  ): Promise<api.MoveConsensusLeaderResponse> {
    return this.call((l, m, o, cb) => l.management.moveConsensusLeader(req, m, o, cb));
  }

  /** DefragmentConsensus, within `timeoutMs` (a large database takes a while). */
  defragmentConsensus(
    req: api.DefragmentConsensusRequest,
    timeoutMs?: number,
  ): Promise<api.DefragmentConsensusResponse> {
    return this.call((l, m, o, cb) => l.management.defragmentConsensus(req, m, o, cb), timeoutMs);
  }

  getConsensusAlarms(): Promise<api.GetConsensusAlarmsResponse> {
    return this.call((l, m, o, cb) => l.management.getConsensusAlarms({}, m, o, cb));
  }

  /** The cluster's health checks, computed by the curator leader (Management.GetClusterHealth). */
  getClusterHealth(): Promise<api.GetClusterHealthResponse> {
    return this.call((l, m, o, cb) => l.management.getClusterHealth({}, m, o, cb));
  }

  disarmConsensusAlarm(
    req: api.DisarmConsensusAlarmRequest,
  ): Promise<api.DisarmConsensusAlarmResponse> {
    return this.call((l, m, o, cb) => l.management.disarmConsensusAlarm(req, m, o, cb));
  }

  escrow(publicKey: Uint8Array): Promise<api.EscrowResponse> {
    return this.call((l, m, o, cb) =>
      l.aaa.escrow({ publicKey: Buffer.from(publicKey) }, m, o, cb),
    );
  }

  /**
   * Runs one unary call of the Access service on the leader (scoped
   * credentials: access-commands.ts), on the leader's own channel.
   */
  access<Res>(
    invoke: (
      client: access.AccessClient,
      metadata: Metadata,
      options: Partial<CallOptions>,
      callback: Callback<Res>,
    ) => ClientUnaryCall,
  ): Promise<Res> {
    return this.call((l, m, o, cb) =>
      // A client over the leader's channel: never closed itself (that would close the channel).
      invoke(
        new access.AccessClient("leader", credentials.createInsecure(), {
          channelOverride: l.management.getChannel(),
        }),
        m,
        o,
        cb,
      ),
    );
  }

  /** Closes every channel; the process can exit afterwards. */
  close(): void {
    this.connection.close();
  }
}

/** Runs `fn` with an owner session, closing it however `fn` ends. */
export async function withOwnerSession<T>(
  ctx: CommandContext,
  fn: (session: ClusterSession) => Promise<T>,
): Promise<T> {
  const session = await ClusterSession.asOwner(ctx);
  try {
    return await fn(session);
  } finally {
    session.close();
  }
}
