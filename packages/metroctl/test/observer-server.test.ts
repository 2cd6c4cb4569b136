/**
 * The observer's server over real HTTP on 127.0.0.1, with a backend the
 * test feeds: who may talk to it (token, Host, Origin, body size), how its
 * feeds share one upstream and send only changes, and its actions with the
 * API's refusals. The page itself is tested in a browser
 * (observer-page.test.ts, e2e/observer.test.ts).
 */
import { rm } from "node:fs/promises";
import { status } from "@grpc/grpc-js";
import { eventually } from "@metropolis/supervisor/testing";
import { api, common } from "@metropolis/proto";
import { consensusView } from "../src/consensus-view";
import type {
  ClusterDelta,
  ClusterSnapshot,
  ConsensusSnapshot,
} from "../src/observe/observer-protocol";
import { ObserverServer } from "../src/observe/observer-server";
import { maxBodyBytes } from "../src/observe/request-guard";
import {
  EventReader,
  FakeBackend,
  fakeNode,
  fakeNodeId,
  fakeUiDir,
  httpRequest,
  serviceError,
} from "./observer-fixture";

const token = "a".repeat(64);
let uiDir: string;
let backend: FakeBackend;
let server: ObserverServer;
let port: number;
const readers: EventReader[] = [];

beforeAll(async () => {
  uiDir = await fakeUiDir();
});
afterAll(() => rm(uiDir, { recursive: true, force: true }));

beforeEach(async () => {
  backend = new FakeBackend();
  server = await ObserverServer.start({
    backend,
    port: 0,
    uiDir,
    token,
    feedOptions: { coalesceMs: 50, retryMs: 100 },
  });
  port = server.port;
});

afterEach(async () => {
  for (const r of readers.splice(0)) r.close();
  await server.close();
});

const open = async (path: string) => {
  const reader = await EventReader.open(port, path);
  readers.push(reader);
  return reader;
};
const own = () => ({ origin: `http://127.0.0.1:${port}`, "x-observer-token": token });
const post = (path: string, body: string, headers: Record<string, string> = {}) =>
  httpRequest(port, {
    method: "POST",
    path,
    body,
    headers: { ...own(), "content-type": "application/json", ...headers },
  });
const id = fakeNodeId(7);

describe("who may talk to the observer", () => {
  test("listens on 127.0.0.1 only, and its URL carries the token", () => {
    expect(server.url).toBe(`http://127.0.0.1:${port}/#token=${token}`);
  });

  test("a generated token is 32 random bytes, different every launch", async () => {
    const a = await ObserverServer.start({ backend: new FakeBackend(), port: 0, uiDir });
    const b = await ObserverServer.start({ backend: new FakeBackend(), port: 0, uiDir });
    try {
      const tokenOf = (s: ObserverServer) => /#token=([0-9a-f]+)$/.exec(s.url)?.[1];
      expect(tokenOf(a)).toMatch(/^[0-9a-f]{64}$/);
      expect(tokenOf(a)).not.toBe(tokenOf(b));
    } finally {
      await a.close();
      await b.close();
    }
  });

  test("the page is served without the token, with a strict content security policy", async () => {
    const page = await httpRequest(port, { path: "/" });
    expect(page.status).toBe(200);
    expect(page.body).toContain("<title>observer</title>");
    expect(page.headers["content-security-policy"]).toContain("default-src 'self'");
    expect(page.headers["x-frame-options"]).toBe("DENY");
    const script = await httpRequest(port, { path: "/assets/index-test.js" });
    expect(script.headers["content-type"]).toMatch(/^text\/javascript/);
    expect((await httpRequest(port, { path: "/../../etc/passwd" })).status).toBe(404);
    expect((await httpRequest(port, { path: "/assets/missing.js" })).status).toBe(404);
  });

  test("an API request without the token, or with a wrong one, is refused (401)", async () => {
    const none = await httpRequest(port, { path: "/api/cluster/events" });
    expect(none.status).toBe(401);
    expect(JSON.parse(none.body)).toEqual({
      ok: false,
      error: "missing or wrong observer token: open the URL metroctl printed",
    });
    const wrong = await httpRequest(port, { path: `/api/cluster/events?token=${"b".repeat(64)}` });
    expect(wrong.status).toBe(401);
    const short = await httpRequest(port, {
      path: "/api/cluster/events",
      headers: { "x-observer-token": token.slice(1) },
    });
    expect(short.status).toBe(401);
    expect((await post(`/api/nodes/${id}/approve`, "{}", { "x-observer-token": "x" })).status).toBe(
      401,
    );
    expect(backend.calls).toEqual([]);
    expect(backend.clusterOpened).toBe(0);
  });

  test("a request naming another host (DNS rebinding) is refused (421), even with the token", async () => {
    for (const host of ["evil.example:" + port, "localhost:" + port, "127.0.0.1:1"]) {
      const answer = await httpRequest(port, {
        path: `/api/cluster/events?token=${token}`,
        headers: { host },
      });
      expect(answer.status).toBe(421);
      expect(answer.body).toContain(`this server is 127.0.0.1:${port} only`);
    }
    expect((await httpRequest(port, { path: "/", headers: { host: "evil.example" } })).status).toBe(
      421,
    );
  });

  test("a request from another origin or site is refused (403), even with the token", async () => {
    const foreign = await post(`/api/nodes/${id}/approve`, "{}", { origin: "http://evil.example" });
    expect(foreign.status).toBe(403);
    expect(foreign.body).toContain("other origins");
    const otherPort = await httpRequest(port, {
      path: `/api/cluster/events?token=${token}`,
      headers: { origin: "http://127.0.0.1:1" },
    });
    expect(otherPort.status).toBe(403);
    const crossSite = await httpRequest(port, {
      path: `/api/cluster/events?token=${token}`,
      headers: { "sec-fetch-site": "cross-site" },
    });
    expect(crossSite.status).toBe(403);
    const noOrigin = await httpRequest(port, {
      method: "POST",
      path: `/api/nodes/${id}/approve`,
      body: "{}",
      headers: { "x-observer-token": token, "content-type": "application/json" },
    });
    expect(noOrigin.status).toBe(403);
    expect(noOrigin.body).toContain("own page");
    expect(backend.calls).toEqual([]);
  });

  test("bodies: larger than the limit 413, not JSON 400 or 415; nothing is echoed back", async () => {
    const big = JSON.stringify({ changes: ["k=" + "v".repeat(maxBodyBytes)] });
    const tooBig = await post(`/api/nodes/${id}/labels`, big);
    expect(tooBig.status).toBe(413);
    expect(tooBig.body.length).toBeLessThan(200);
    // Without a Content-Length (chunked), the limit holds while reading.
    const chunked = await post(`/api/nodes/${id}/labels`, big, { "transfer-encoding": "chunked" });
    expect(chunked.status).toBe(413);
    expect((await post(`/api/nodes/${id}/labels`, "{not json")).status).toBe(400);
    const text = await post(`/api/nodes/${id}/labels`, "{}", { "content-type": "text/plain" });
    expect(text.status).toBe(415);
    expect(backend.calls).toEqual([]);
  });

  test("malformed node IDs, unknown routes and wrong methods are refused", async () => {
    expect((await post("/api/nodes/metropolis-zz/approve", "{}")).status).toBe(400);
    expect((await httpRequest(port, { path: "/api/nope", headers: own() })).status).toBe(404);
    const getApprove = await httpRequest(port, {
      path: `/api/nodes/${id}/approve`,
      headers: own(),
    });
    expect(getApprove.status).toBe(405);
    expect((await post(`/api/nodes/${id}/roles`, '{"worker":"yes"}')).status).toBe(400);
    expect((await post(`/api/nodes/${id}/labels`, '{"changes":[1]}')).status).toBe(400);
    const badLevel = await httpRequest(port, {
      path: `/api/nodes/${id}/logs/events?level=trace`,
      headers: own(),
    });
    expect(badLevel.status).toBe(400);
    expect(backend.calls).toEqual([]);
  });
});

describe("actions", () => {
  test("approve, roles and labels reach the backend and answer its message", async () => {
    const approved = await post(`/api/nodes/${id}/approve`, "{}");
    expect(approved.status).toBe(200);
    expect(JSON.parse(approved.body)).toEqual({ ok: true, message: `node ${id} approved` });
    expect((await post(`/api/nodes/${id}/roles`, '{"worker":true,"consensus":false}')).status).toBe(
      200,
    );
    expect((await post(`/api/nodes/${id}/labels`, '{"changes":["zone=a","rack-"]}')).status).toBe(
      200,
    );
    expect(backend.calls).toEqual([
      { kind: "approve", id },
      { kind: "roles", id, change: { worker: true, consensus: false } },
      { kind: "labels", id, change: { changes: ["zone=a", "rack-"] } },
    ]);
  });

  test("a refusal of the API is answered with its status and message, as metroctl prints it", async () => {
    backend.refuseWith = serviceError(status.FAILED_PRECONDITION, "node is not NEW");
    const refused = await post(`/api/nodes/${id}/approve`, "{}");
    expect(refused.status).toBe(422);
    expect(JSON.parse(refused.body)).toEqual({
      ok: false,
      error: "FAILED_PRECONDITION: node is not NEW",
    });
  });
});

describe("live feeds", () => {
  test("pages share one upstream, get a snapshot first, then only what changed", async () => {
    const first = await open(`/api/cluster/events?token=${token}`);
    backend.clusterChannel.push({ nodes: [fakeNode(0), fakeNode(1)], leaderId: fakeNodeId(0) });
    const initial = (await first.nth("delta")).data as ClusterDelta;
    expect(initial.upserts.map((n) => n.id)).toEqual([fakeNodeId(0), fakeNodeId(1)]);
    expect(initial.leaderId).toBe(fakeNodeId(0));

    const second = await open(`/api/cluster/events?token=${token}`);
    const snapshot = (await second.nth("snapshot")).data as ClusterSnapshot;
    expect(snapshot.nodes).toHaveLength(2);
    expect(backend.clusterOpened).toBe(1);

    // The same list again (only the heartbeat age grew): nothing to send.
    backend.clusterChannel.push({
      nodes: [fakeNode(0, { heartbeatAgeSeconds: 2 }), fakeNode(1)],
      leaderId: fakeNodeId(0),
    });
    // node1 stops heartbeating; node0 gets a new heartbeat; node2 registers.
    backend.clusterChannel.push({
      nodes: [
        fakeNode(0, { heartbeatAt: 1_700_000_005_000 }),
        fakeNode(1, { health: "HEARTBEAT_TIMEOUT" }),
        fakeNode(2, { state: "NEW", roles: [] }),
      ],
      leaderId: fakeNodeId(0),
    });
    for (const reader of [first, second]) {
      const delta = (await reader.nth("delta", reader === first ? 2 : 1)).data as ClusterDelta;
      expect(delta.upserts.map((n) => [n.id, n.health, n.state])).toEqual([
        [fakeNodeId(0), "HEALTHY", "UP"],
        [fakeNodeId(1), "HEARTBEAT_TIMEOUT", "UP"],
        [fakeNodeId(2), "HEALTHY", "NEW"],
      ]);
      expect(delta.removed).toEqual([]);
    }
    backend.clusterChannel.push({
      nodes: [fakeNode(0, { heartbeatAt: 1_700_000_005_000 })],
      leaderId: fakeNodeId(1),
    });
    const removal = (await second.nth("delta", 2)).data as ClusterDelta;
    expect(removal).toMatchObject({ upserts: [], leaderId: fakeNodeId(1) });
    expect(removal.removed.sort()).toEqual([fakeNodeId(1), fakeNodeId(2)]);
  });

  test("the consensus feed sends the latest consensus, first to late pages too", async () => {
    const leader = { nodeId: fakeNodeId(0), host: "10.0.0.1", port: 7835, term: 12 };
    const voter: ConsensusSnapshot["members"][number] = {
      nodeId: fakeNodeId(0),
      memberId: "a1",
      status: "voter",
      raftLeader: true,
      reachability: "reachable",
      curatorRunning: true,
    };
    const raft = { leaderMemberId: "a1", term: 3 };
    const faultTolerance = {
      voters: 1,
      learners: 0,
      quorum: 1,
      tolerates: 0,
      unreachableVoters: 0,
    };
    const first = await open(`/api/consensus/events?token=${token}`);
    const one: ConsensusSnapshot = { members: [voter], leader, raft, faultTolerance };
    backend.consensusChannel.push(one);
    expect((await first.nth("consensus")).data).toEqual(one);
    // A learner joins, then a failover: a new leader with a larger term.
    const learner: ConsensusSnapshot["members"][number] = {
      nodeId: "",
      memberId: "b2",
      status: "learner",
      raftLeader: false,
      reachability: "unreachable",
      curatorRunning: false,
    };
    const next: ConsensusSnapshot = {
      members: [voter, learner],
      leader: { ...leader, nodeId: fakeNodeId(1), term: 40 },
      raft,
      faultTolerance: { ...faultTolerance, learners: 1 },
    };
    backend.consensusChannel.push(next);
    expect((await first.nth("consensus", 2)).data).toEqual(next);
    const late = await open(`/api/consensus/events?token=${token}`);
    expect((await late.nth("consensus")).data).toEqual(next);
  });

  test("a GetClusterConsensus answer becomes the consensus view's snapshot", () => {
    const Status = common.ConsensusMember_Status;
    const Reachability = common.ConsensusMember_Reachability;
    const faultTolerance = {
      voters: 2,
      learners: 1,
      quorum: 2,
      tolerates: 0,
      unreachableVoters: 1,
    };
    const res: api.GetClusterConsensusResponse = {
      members: [
        {
          nodeId: "",
          memberId: "f0",
          status: Status.LEARNER,
          curatorRunning: false,
          raftLeader: false,
          reachability: Reachability.UNREACHABLE,
        },
        {
          nodeId: fakeNodeId(2),
          memberId: "0b",
          status: Status.VOTER,
          curatorRunning: false,
          raftLeader: false,
          reachability: Reachability.UNKNOWN,
        },
        {
          nodeId: fakeNodeId(1),
          memberId: "0a",
          status: Status.VOTER,
          curatorRunning: true,
          raftLeader: true,
          reachability: Reachability.REACHABLE,
        },
      ],
      leader: { nodeId: fakeNodeId(1), host: "10.0.0.2", port: 7835, term: 7 },
      raft: { leaderMemberId: "0a", term: 5 },
      faultTolerance,
    };
    expect(consensusView(res)).toEqual({
      // Voters first, by node ID; then learners.
      members: [
        {
          nodeId: fakeNodeId(1),
          memberId: "0a",
          status: "voter",
          raftLeader: true,
          reachability: "reachable",
          curatorRunning: true,
        },
        {
          nodeId: fakeNodeId(2),
          memberId: "0b",
          status: "voter",
          raftLeader: false,
          reachability: "unknown",
          curatorRunning: false,
        },
        {
          nodeId: "",
          memberId: "f0",
          status: "learner",
          raftLeader: false,
          reachability: "unreachable",
          curatorRunning: false,
        },
      ],
      leader: { nodeId: fakeNodeId(1), host: "10.0.0.2", port: 7835, term: 7 },
      raft: { leaderMemberId: "0a", term: 5 },
      faultTolerance,
    });
    // Nothing said: no leaders, no raft, no fault tolerance; a raft without a leader says null.
    expect(consensusView({ members: [], leader: undefined })).toEqual({
      members: [],
      leader: null,
      raft: null,
      faultTolerance: null,
    });
    expect(consensusView({ members: [], raft: { leaderMemberId: "", term: 9 } }).raft).toEqual({
      leaderMemberId: null,
      term: 9,
    });
  });

  test("changes are applied to the list, and a new backlog (a new watch) sends only what differs", async () => {
    const reader = await open(`/api/cluster/events?token=${token}`);
    backend.clusterChannel.push({ nodes: [fakeNode(0), fakeNode(1)], leaderId: fakeNodeId(0) });
    await reader.nth("delta");
    // A label change of node1, node2 registers, node0 is deleted.
    backend.clusterChannel.push({
      upserts: [fakeNode(1, { labels: { zone: "b" } }), fakeNode(2, { state: "NEW", roles: [] })],
      removed: [fakeNodeId(0)],
      leaderId: fakeNodeId(0),
    });
    const changes = (await reader.nth("delta", 2)).data as ClusterDelta;
    expect(changes.upserts.map((n) => n.id)).toEqual([fakeNodeId(1), fakeNodeId(2)]);
    expect(changes.removed).toEqual([fakeNodeId(0)]);
    // An upsert of a node exactly as the page has it is not sent again.
    backend.clusterChannel.push({
      upserts: [fakeNode(2, { state: "NEW", roles: [] })],
      removed: [],
      leaderId: fakeNodeId(0),
    });
    // The watch started over on a new leader: its backlog replaces the list.
    backend.clusterChannel.push({
      nodes: [fakeNode(1, { labels: { zone: "b" } }), fakeNode(3)],
      leaderId: fakeNodeId(1),
    });
    const reset = (await reader.nth("delta", 3)).data as ClusterDelta;
    expect(reset.upserts.map((n) => n.id)).toEqual([fakeNodeId(3)]);
    expect(reset.removed).toEqual([fakeNodeId(2)]);
    expect(reset.leaderId).toBe(fakeNodeId(1));
    const late = await open(`/api/cluster/events?token=${token}`);
    const snapshot = (await late.nth("snapshot")).data as ClusterSnapshot;
    expect(snapshot.nodes.map((n) => n.id).sort()).toEqual([fakeNodeId(1), fakeNodeId(3)].sort());
  });

  test("the last page to leave stops the upstream; a broken upstream is reported and retried", async () => {
    const reader = await open(`/api/cluster/events?token=${token}`);
    await eventually(() => backend.clusterOpen === 1, "the upstream runs");
    reader.close();
    await eventually(() => backend.clusterOpen === 0, "the upstream stops with the last page");

    let attempts = 0;
    backend.cluster = async function* () {
      attempts++;
      yield* [];
      throw serviceError(status.UNAVAILABLE, "no connection to the curator leader");
    };
    const again = await open(`/api/cluster/events?token=${token}`);
    const failure = await again.nth("failure");
    expect(failure.data).toEqual({
      message: "UNAVAILABLE: no connection to the curator leader",
      retryInMs: 100,
    });
    await again.nth("failure", 2);
    expect(attempts).toBeGreaterThanOrEqual(2);
  });

  test("a node's tree, reports and logs: kept for late pages, batched, filtered by query", async () => {
    const tree = await open(`/api/nodes/${id}/tree/events?token=${token}`);
    const runnable = {
      dn: "root",
      name: "root",
      state: "HEALTHY",
      restarts: 0,
      since: null,
      lastError: null,
      nextRestartInMs: null,
      givenUp: false,
      status: "leading.leaseUnconfirmed",
      children: [],
    };
    backend.trees.push({ roots: [runnable], receivedAt: 1 });
    backend.trees.push({ roots: [{ ...runnable, state: "DEAD", restarts: 1 }], receivedAt: 2 });
    const latest = await tree.nth("tree");
    // Two snapshots within one coalescing interval: only the latest is sent.
    expect(latest.data).toEqual({
      roots: [{ ...runnable, state: "DEAD", restarts: 1 }],
      receivedAt: 2,
    });

    const reports = await open(`/api/nodes/${id}/reports/events?token=${token}`);
    const report = { seq: 1, time: null, kind: "died", dn: "root.x" };
    backend.reportsChannel.push([report]);
    backend.reportsChannel.push([{ ...report, seq: 2, kind: "restart-scheduled" }]);
    await eventually(
      () =>
        reports.events
          .filter((e) => e.event === "reports")
          .flatMap((e) => (e.data as { reports: unknown[] }).reports).length === 2,
      "both reports arrive",
    );
    const late = await open(`/api/nodes/${id}/reports/events?token=${token}`);
    expect(((await late.nth("reports")).data as { reports: unknown[] }).reports).toHaveLength(2);

    await open(
      `/api/nodes/${id}/logs/events?token=${token}&dn=root.roleserver&level=warn&follow=1`,
    );
    await eventually(() => backend.logQueries.length === 1, "the logs upstream opens");
    expect(backend.logQueries[0]).toEqual({ dn: "root.roleserver", level: "warn", follow: true });
  });

  test("1,000 nodes: a page gets the whole cluster once, then only the nodes that changed", async () => {
    const nodes = Array.from({ length: 1000 }, (_, i) => fakeNode(i));
    const pages = await Promise.all(
      Array.from({ length: 20 }, () => open(`/api/cluster/events?token=${token}`)),
    );
    let started = performance.now();
    backend.clusterChannel.push({ nodes, leaderId: fakeNodeId(0) });
    for (const page of pages) await page.nth("delta");
    const firstMs = performance.now() - started;
    expect(((await pages[0].nth("delta")).data as ClusterDelta).upserts).toHaveLength(1000);

    // 50 nodes heartbeat anew, 3 time out.
    const changed = nodes.map((n, i) =>
      i % 20 === 0
        ? { ...n, heartbeatAt: (n.heartbeatAt ?? 0) + 5000 }
        : i >= 997
          ? { ...n, health: "HEARTBEAT_TIMEOUT" }
          : n,
    );
    started = performance.now();
    backend.clusterChannel.push({ nodes: changed, leaderId: fakeNodeId(0) });
    for (const page of pages) await page.nth("delta", 2);
    const deltaMs = performance.now() - started;
    const delta = (await pages[19].nth("delta", 2)).data as ClusterDelta;
    expect(delta.upserts).toHaveLength(53);
    const size = JSON.stringify(delta).length;
    process.stdout.write(
      `observer fan-out, 1,000 nodes to 20 pages: first list ${firstMs.toFixed(0)} ms, ` +
        `53 changes ${deltaMs.toFixed(0)} ms (${(size / 1024).toFixed(1)} KiB a page, coalescing 50 ms included)\n`,
    );
  });
});
