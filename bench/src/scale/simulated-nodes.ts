/**
 * The scale simulator's nodes: many enrolled nodes in one process, each
 * running what a real node runs against its cluster — the roleserver's own
 * workers on its own `CuratorConnection` (its own identity, its own TLS
 * connections, the node's leader discovery and retries) under a supervisor:
 *
 * - heartbeat: the heartbeat stream at the production interval;
 * - statuspush: its status (a unique loopback address) at start and on change;
 * - rolefetch: a Watch of itself, its roles persisted to a file of its own.
 *
 * A failed worker is restarted with the supervisor's jittered backoff
 * exactly as on a node. Nothing here is a stand-in for the node's client: a
 * bottleneck found here is fixed in roleserve or curator. Not run: the
 * directory worker (a Watch of every node, per node) and the revocation
 * worker (curator README, "Cost model", says why).
 *
 * One setting differs from a node's: the HTTP/2 keepalive's timeout
 * ({@link simulatedKeepalive}). The rest is the node's own code.
 *
 * The supervisor's log lines are counted, not written (thousands of nodes
 * each logging their restarts would measure the terminal); the first error
 * is kept for the report. The simulator runs these in node host processes
 * (scale/node-hosts.ts), each with its share of the nodes.
 */
import { join } from "node:path";
import { CuratorConnection, type CuratorAddress, type CuratorKeepalive } from "@metropolis/curator";
import { dir, file, place, protobufCodec } from "@metropolis/localstorage";
import { common } from "@metropolis/proto";
import {
  nodeCuratorConnection,
  nodeCuratorKeepalive,
  heartbeatRestartBackoff,
  heartbeatWorker,
  roleFetchWorker,
  RoleserveValues,
  statusPushWorker,
} from "@metropolis/roleserve";
import { supervise, type Logger, type Runnable, type Supervisor } from "@metropolis/supervisor";
import type { RegisteredNode } from "../curator/registration";

/** Distinct kinds of error kept by CountingLogger; later new kinds are counted as "(other)". */
const maxErrorKinds = 30;

/**
 * An error message as a kind: numbers, node IDs and addresses replaced by "#",
 * so that the same failure of many nodes counts once.
 */
export function errorKind(message: string): string {
  return message
    .slice(0, 240)
    .replace(/metropolis-[0-9a-f]+/g, "metropolis-#")
    .replace(/\d+(\.\d+)*/g, "#");
}

/** A logger that writes nothing and counts what it was given. */
class CountingLogger implements Logger {
  errors = 0;
  warnings = 0;
  firstError: string | undefined;
  /** Errors by kind (errorKind), since the last `takeKinds()`. */
  private kinds = new Map<string, number>();
  error(message: string): void {
    this.errors++;
    this.firstError ??= message;
    let kind = errorKind(message);
    if (!this.kinds.has(kind) && this.kinds.size >= maxErrorKinds) kind = "(other)";
    this.kinds.set(kind, (this.kinds.get(kind) ?? 0) + 1);
  }
  /** The error kinds counted since the last call, and a fresh count. */
  takeKinds(): Record<string, number> {
    const kinds = Object.fromEntries(this.kinds);
    this.kinds = new Map();
    return kinds;
  }
  warn(): void {
    this.warnings++;
  }
  info(): void {}
  debug(): void {}
  isLevelEnabled(level: string): boolean {
    return level === "error" || level === "warn";
  }
}

/**
 * The simulated nodes' HTTP/2 keepalive: a node's ping interval, with a
 * timeout of 60 s instead of 20 s. grpc-js times a ping out with a plain
 * timer, and Node runs an iteration's overdue timers before it reads that
 * iteration's sockets. A node host running 1,250 nodes on an eighth of a
 * CPU runs its loop up to 25 s late through a 10,000-node failover (`the
 * node hosts' event loop delay` in the report), so the timer fired with the
 * curator's answer unread, and connections the new leader served were
 * dropped and dialled again, each a new TLS handshake for the leader: at
 * 10,000 nodes, 234 s until every node was HEALTHY again, and the second
 * failover gave up (4,434 HEALTHY after 336 s). With this timeout, 67.5
 * and 159 s, and every node's streams failed once per failover, as they
 * must. A node has a CPU of its own, and its loop is not seconds late; the
 * curators' loops stalled up to 1.2 s through these failovers (11.8 s
 * amid the redials before), so the leader answers a ping well within
 * either timeout.
 */
export const simulatedKeepalive: CuratorKeepalive = {
  timeMs: nodeCuratorKeepalive.timeMs,
  timeoutMs: 60_000,
};

export class SimulatedNodes {
  /** Answer latencies of heartbeats, in ms, while recording. */
  readonly latencies: number[] = [];
  /** When each of those heartbeats was sent (epoch ms), in the same order. */
  readonly sentAt: number[] = [];
  readonly log = new CountingLogger();
  private recording = false;
  private readonly connections: CuratorConnection[] = [];
  /** One supervision tree per batch added (a runnable starts its children before it is healthy). */
  private readonly supervisors: Supervisor[] = [];
  /** Nodes added so far (numbers their addresses). */
  private count = 0;

  /**
   * @param stateDir where each node keeps its roles file (a directory per node)
   * @param addressPrefix the first two octets of the nodes' addresses: node
   *   `i` of this process reports `prefix.(i / 256).(i % 256)`, unique in the cluster
   */
  constructor(
    private readonly curators: readonly CuratorAddress[],
    private readonly heartbeatIntervalMs: number,
    private readonly stateDir: string,
    private readonly addressPrefix: string,
  ) {}

  /** Starts the workers of each of `nodes`, under a new supervision tree. */
  async add(nodes: readonly RegisteredNode[]): Promise<void> {
    const workers: Record<string, Record<string, Runnable>> = {};
    for (const node of nodes) {
      const i = this.count++;
      // The node's own connection to its curators (standby connections included).
      const connection = nodeCuratorConnection(this.curators, node.credentials, {
        keepalive: simulatedKeepalive,
      });
      this.connections.push(connection);
      const values = new RoleserveValues();
      values.curatorConnection.set({ credentials: node.credentials, connection });
      values.localControlPlane.set(undefined); // a node without the consensus role
      const storage = place(
        dir({ roles: file("roles.pb", { codec: protobufCodec(common.NodeRoles) }) }),
        join(this.stateDir, node.nodeId),
      );
      await storage.mkdirAll();
      workers[`n${i}`] = {
        heartbeat: heartbeatWorker(values, {
          intervalMs: this.heartbeatIntervalMs,
          onAnswered: (ms) => {
            if (!this.recording) return;
            this.latencies.push(ms);
            this.sentAt.push(Date.now() - ms);
          },
        }),
        statuspush: statusPushWorker(values, {
          address: `${this.addressPrefix}.${(i >> 8) & 255}.${i & 255}`,
          version: "scale-simulator",
          bootId: node.nodeId,
        }),
        rolefetch: roleFetchWorker(values, { roles: storage.roles }),
      };
    }
    // Restarted as the roleserver restarts a node's workers.
    const backoff = heartbeatRestartBackoff(this.heartbeatIntervalMs);
    this.supervisors.push(
      supervise(
        async (ctx) => {
          for (const [name, node] of Object.entries(workers)) {
            ctx.run(name, async (nodeCtx) => {
              nodeCtx.run("heartbeat", node.heartbeat, { backoff });
              nodeCtx.run("statuspush", node.statuspush);
              nodeCtx.run("rolefetch", node.rolefetch);
              nodeCtx.healthy();
              await nodeCtx.untilAborted();
            });
          }
          ctx.healthy();
          await ctx.untilAborted();
        },
        { logger: this.log },
      ),
    );
  }

  /** Records heartbeat latencies from now (clearing earlier ones) until `stopRecording`. */
  startRecording(): void {
    this.latencies.length = 0;
    this.sentAt.length = 0;
    this.recording = true;
  }

  stopRecording(): void {
    this.recording = false;
  }

  /** Stops every node's worker and closes its connection. */
  async stop(): Promise<void> {
    await Promise.all(this.supervisors.map((s) => s.stop()));
    for (const c of this.connections) c.close();
  }
}
