/**
 * Management.WatchNodes against a real leader: one-member etcd, a
 * bootstrapped cluster, real mTLS (startLeader of @metropolis/curator/testing),
 * with the Curator service beside it so that nodes heartbeat over gRPC as
 * they do in a cluster.
 */
import { status, type ClientReadableStream, type ServiceError } from "@grpc/grpc-js";
import { api, common, curator } from "@metropolis/proto";
import { curatorServer } from "../src/curator-service";
import { managementServer, managementService } from "../src/management-service";
import { WATCH_BACKLOG_CHUNK } from "../src/node-watch-streams";
import { maxNodeWatchStreamsPerConnection } from "../src/server-limits";
import { startLeader, type ClusterNode, type LeaderFixture } from "@metropolis/curator/testing";

const { LAST_BACKLOGGED } = api.WatchNodesResponse_Progress;
const HEARTBEAT_TIMEOUT_MS = 1_500;

/**
 * A WatchNodes stream's messages and the view they add up to. `until`
 * resolves when a condition holds, checked at each message (not polled),
 * and fails at its deadline or when the stream fails.
 */
class NodeStream {
  readonly messages: api.WatchNodesResponse[] = [];
  readonly view = new Map<string, api.Node>();
  error?: ServiceError;
  private check: () => void = () => undefined;

  constructor(readonly stream: ClientReadableStream<api.WatchNodesResponse>) {
    stream.on("data", (m: api.WatchNodesResponse) => {
      this.messages.push(m);
      for (const node of m.nodes) this.view.set(node.id, node);
      for (const { nodeId } of m.nodeTombstones) this.view.delete(nodeId);
      this.check();
    });
    stream.on("error", (e: ServiceError) => {
      this.error = e;
      this.check();
    });
  }

  /** Index of the message that ended the backlog, or -1. */
  get backlogEnd(): number {
    return this.messages.findIndex((m) => m.progress === LAST_BACKLOGGED);
  }

  until(done: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.check = () => undefined;
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      this.check = () => {
        if (this.error && !done()) {
          reject(this.error);
        } else if (!done()) return;
        else resolve();
        clearTimeout(timer);
        this.check = () => undefined;
      };
      this.check();
    });
  }

  /** Messages after the backlog that name node `id`, as a change or a tombstone. */
  changesOf(id: string): api.WatchNodesResponse[] {
    return this.messages
      .slice(this.backlogEnd + 1)
      .filter(
        (m) => m.nodes.some((n) => n.id === id) || m.nodeTombstones.some((t) => t.nodeId === id),
      );
  }
}

let leader: LeaderFixture;
let owner: api.ManagementClient;
const streams: NodeStream[] = [];

/** A WatchNodes stream of `client` (default: the owner's), cancelled after the test. */
function watch(
  client: api.ManagementClient = owner,
  request: api.WatchNodesRequest = { heartbeats: false },
): NodeStream {
  const s = new NodeStream(client.watchNodes(request));
  streams.push(s);
  return s;
}

/** A watch with its backlog received. */
async function watched(request?: api.WatchNodesRequest): Promise<NodeStream> {
  const s = watch(owner, request);
  await s.until(() => s.backlogEnd >= 0, "the backlog");
  return s;
}

const unary = <Res>(f: (cb: (e: ServiceError | null, r?: Res) => void) => unknown) =>
  new Promise<Res | undefined>((resolve, reject) => f((e, r) => (e ? reject(e) : resolve(r))));

beforeAll(async () => {
  leader = await startLeader({
    heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS,
    services: (ctx) => [
      [managementService, managementServer(ctx)],
      [curator.CuratorService, curatorServer(ctx)],
    ],
  });
  owner = await leader.client(api.ManagementClient, "owner");
}, 30_000);

afterEach(() => {
  for (const s of streams.splice(0)) s.stream.cancel();
});

afterAll(async () => {
  await leader?.stop();
});

describe("WatchNodes", () => {
  it("sends every node in chunks, the last marked, as GetNodes shows them", async () => {
    // More than two chunks' worth; NEW nodes, which need no certificates, are quick to add.
    for (let i = 0; i < 2 * WATCH_BACKLOG_CHUNK + 5; i++) {
      await leader.addNode({ state: common.NodeState.NEW, labels: new Map([["i", String(i)]]) });
    }
    const listed = await unary<api.GetNodesResponse>((cb) =>
      owner.getNodes(api.GetNodesRequest.fromPartial({}), cb),
    );
    const s = await watched();
    const backlog = s.messages.slice(0, s.backlogEnd + 1);
    expect(backlog.length).toBe(3);
    for (const m of backlog) expect(m.nodes.length).toBeLessThanOrEqual(WATCH_BACKLOG_CHUNK);
    expect(backlog.filter((m) => m.progress === LAST_BACKLOGGED)).toHaveLength(1);
    const sent = backlog.flatMap((m) => m.nodes);
    // Every node once, as GetNodes shows it (but for the time since a heartbeat, which ages).
    const strip = (n: api.Node) => ({ ...n, timeSinceHeartbeatMs: undefined });
    const byId = (a: api.Node, b: api.Node) => a.id.localeCompare(b.id);
    expect(sent.map(strip).sort(byId)).toEqual((listed?.nodes ?? []).map(strip).sort(byId));
    expect(new Set(sent.map((n) => n.id)).size).toBe(sent.length);
  });

  it("sends a label change as one update of the node", async () => {
    const node = await leader.addNode();
    const s = await watched();
    await unary((cb) =>
      owner.updateNodeLabels(
        api.UpdateNodeLabelsRequest.fromPartial({
          node: { $case: "id", id: node.nodeId },
          add: new Map([["zone", "b"]]),
        }),
        cb,
      ),
    );
    await s.until(() => s.view.get(node.nodeId)?.labels.get("zone") === "b", "the new label");
    const changes = s.changesOf(node.nodeId);
    expect(changes).toHaveLength(1);
    expect(changes[0].nodes).toHaveLength(1);
    expect(changes[0].nodes[0]).toMatchObject({ id: node.nodeId, state: common.NodeState.UP });
  });

  it("sends a deleted node as a tombstone", async () => {
    const node = await leader.addNode({ state: common.NodeState.NEW });
    const s = await watched();
    expect(s.view.has(node.nodeId)).toBe(true);
    await unary((cb) =>
      owner.deleteNode(
        api.DeleteNodeRequest.fromPartial({ node: { $case: "id", id: node.nodeId } }),
        cb,
      ),
    );
    await s.until(() => !s.view.has(node.nodeId), "the tombstone");
    expect(s.changesOf(node.nodeId)).toEqual([
      {
        nodes: [],
        nodeTombstones: [{ nodeId: node.nodeId }],
        progress: api.WatchNodesResponse_Progress.UNSPECIFIED,
      },
    ]);
  });

  it("sends a node again when it turns HEALTHY and when it stops heartbeating", async () => {
    const node: ClusterNode = await leader.addNode();
    const s = await watched();
    const client = await leader.client(curator.CuratorClient, { node });
    const beats = client.heartbeat();
    const answered = new Promise<void>((resolve, reject) => {
      beats.once("data", () => resolve());
      beats.once("error", reject);
    });
    beats.write({});
    await answered;
    const health = () => s.view.get(node.nodeId)?.health;
    await s.until(() => health() === common.NodeHealth.HEALTHY, "HEALTHY");
    expect(s.view.get(node.nodeId)?.timeSinceHeartbeatMs).toBeGreaterThanOrEqual(0);
    const stopped = Date.now();
    const closed = new Promise<void>((resolve) => beats.on("status", () => resolve()));
    beats.end();
    await closed;
    // The timeout, then at most one check interval (1 s) late; generous for a loaded machine.
    await s.until(
      () => health() === common.NodeHealth.HEARTBEAT_TIMEOUT,
      "HEARTBEAT_TIMEOUT",
      HEARTBEAT_TIMEOUT_MS + 5_000,
    );
    expect(Date.now() - stopped).toBeGreaterThanOrEqual(HEARTBEAT_TIMEOUT_MS);
    // Each change once: HEALTHY, then HEARTBEAT_TIMEOUT, nothing in between. (Before
    // the beat, a leader younger than the timeout may turn the unheard node from
    // UNKNOWN to HEARTBEAT_TIMEOUT: not what this test is about.)
    const sent = s.changesOf(node.nodeId).map((m) => m.nodes[0]?.health);
    expect(sent.slice(sent.indexOf(common.NodeHealth.HEALTHY))).toEqual([
      common.NodeHealth.HEALTHY,
      common.NodeHealth.HEARTBEAT_TIMEOUT,
    ]);
  });

  it("with heartbeats set, sends a node again when it beats, at most about once a second", async () => {
    const node: ClusterNode = await leader.addNode();
    const s = await watched({ heartbeats: true });
    const client = await leader.client(curator.CuratorClient, { node });
    const beats = client.heartbeat();
    const beat = () =>
      new Promise<void>((resolve, reject) => {
        beats.once("data", () => resolve());
        beats.once("error", reject);
        beats.write({});
      });
    await beat();
    await s.until(() => s.changesOf(node.nodeId).length === 1, "HEALTHY");
    await beat();
    await beat();
    // Both beats of the same check interval (1 s) count once: one message by the next check.
    await s.until(() => s.changesOf(node.nodeId).length === 2, "the heartbeat", 5_000);
    const [, again] = s.changesOf(node.nodeId);
    expect(again.nodes).toHaveLength(1);
    expect(again.nodes[0].health).toBe(common.NodeHealth.HEALTHY);
    expect(again.nodes[0].timeSinceHeartbeatMs).toBeLessThan(1_500);
    beats.end();
  });

  it("refuses everyone but the owner", async () => {
    for (const [identity, code] of [
      ["node", status.PERMISSION_DENIED],
      ["none", status.UNAUTHENTICATED],
    ] as const) {
      const s = watch(await leader.client(api.ManagementClient, identity));
      await expect(s.until(() => false, "the refusal")).rejects.toMatchObject({ code });
      expect(s.messages).toEqual([]);
    }
  });

  it("caps the streams of one connection", async () => {
    const open = Array.from({ length: maxNodeWatchStreamsPerConnection }, () => watch());
    await Promise.all(open.map((s) => s.until(() => s.backlogEnd >= 0, "the backlog")));
    const refused = watch();
    await expect(refused.until(() => false, "the refusal")).rejects.toMatchObject({
      code: status.RESOURCE_EXHAUSTED,
    });
  });
});
