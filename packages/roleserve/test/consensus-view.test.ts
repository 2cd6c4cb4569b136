/**
 * The consensus view reader: the local member's list (hex IDs, sorted),
 * raft leader and database size and quota, read while the node runs a
 * control plane, dropped when it stops running one, no view from a member
 * that does not answer in time, and a view without a database size when
 * only its metrics fail. The member is a stand-in: what it answers is
 * etcd's (etcd3's decimal IDs, Prometheus text over a unix socket's HTTP);
 * the real member is read in the e2e health test.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server, type ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemoryValue } from "@metropolis/event";
import { eventually, MockContext } from "@metropolis/supervisor/testing";
import { ConsensusViewReader, readConsensusView, type MemberReads } from "../src/consensus-view";

/** etcd's metrics of a 20 MiB database under a 2 GiB quota, as etcd words them. */
const metricsText = [
  "# TYPE etcd_mvcc_db_total_size_in_bytes gauge",
  "etcd_mvcc_db_total_size_in_bytes 2.097152e+07",
  "# TYPE etcd_server_quota_backend_bytes gauge",
  "etcd_server_quota_backend_bytes 2.147483648e+09",
  "",
].join("\n");

let dir: string;
/** Open metrics servers, closed after each test. */
const servers: Server[] = [];
/** Responses a silent server holds, ended after each test. */
const held: ServerResponse[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "cview-"));
});

afterEach(async () => {
  for (const res of held.splice(0)) res.end();
  await Promise.all(
    servers.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))),
  );
  rmSync(dir, { recursive: true, force: true });
});

/** A stand-in of the member's client socket serving `/metrics`: `body`, or no answer at all (`"silent"`). */
async function metricsSocket(name: string, body: string | "silent"): Promise<string> {
  const path = join(dir, name);
  const server = createServer((req, res) => {
    if (body === "silent") {
      held.push(res);
      return;
    }
    res.writeHead(req.url === "/metrics" ? 200 : 404, { "content-type": "text/plain" });
    res.end(body);
  });
  servers.push(server);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(path, () => resolve());
  });
  return path;
}

/**
 * A member that lists `ids` (decimal, as etcd3 gives them) and follows
 * `leader` (hex), after `delayMs`, with its metrics at `clientSocket`.
 */
function member(
  ids: string[],
  leader: string | undefined,
  delayMs = 0,
  clientSocket = "/nonexistent/client.sock",
): MemberReads {
  const later = <T>(value: T) =>
    new Promise<T>((resolve) => setTimeout(() => resolve(value), delayMs));
  return {
    clientSocket,
    members: () =>
      later(ids.map((ID) => ({ ID, name: "", peerURLs: [], clientURLs: [], isLearner: false }))),
    raftStatus: () =>
      later({
        memberId: "1",
        leaderId: leader,
        raftTerm: 7,
        isLearner: false,
        connectedPeers: undefined,
      }),
  };
}

it("reads the member's IDs as hex, sorted, with the raft leader it follows", async () => {
  const view = await readConsensusView(member(["255", "16", "4096"], "ff"));
  expect(view).toEqual({ memberIds: ["1000", "10", "ff"].sort(), raftLeaderId: "ff", raftTerm: 7 });
  expect((await readConsensusView(member(["1"], undefined))).raftLeaderId).toBe("");
  await expect(readConsensusView(member(["1"], "1", 500), 50)).rejects.toThrow(
    "the etcd member did not answer within 50 ms",
  );
});

it("reads the member's database size and quota from its metrics; without them the view comes all the same", async () => {
  const socket = await metricsSocket("client.sock", metricsText);
  expect(await readConsensusView(member(["1"], "1", 0, socket))).toEqual({
    memberIds: ["1"],
    raftLeaderId: "1",
    raftTerm: 7,
    databaseSizeBytes: 20 * 1024 * 1024,
    databaseQuotaBytes: 2 * 1024 * 1024 * 1024,
  });
  // No socket, metrics without the gauges, a member whose metrics never answer: the rest of the view, and why.
  const lacking = await metricsSocket("lacking.sock", "etcd_server_has_leader 1\n");
  const silent = await metricsSocket("silent.sock", "silent");
  for (const [path, why] of [
    ["/nonexistent/client.sock", "did not answer its metrics"],
    [lacking, "lack etcd_mvcc_db_total_size_in_bytes"],
    [silent, "within 100 ms"],
  ]) {
    const failures: string[] = [];
    const view = await readConsensusView(member(["2", "1"], "1", 0, path), 100, (w) =>
      failures.push(w),
    );
    expect(view).toEqual({ memberIds: ["1", "2"], raftLeaderId: "1", raftTerm: 7 });
    expect(view.databaseSizeBytes).toBeUndefined();
    expect(failures).toEqual([expect.stringContaining(why)]);
  }
});

it("keeps the latest view while the node runs a control plane, none otherwise", async () => {
  const values = {
    localControlPlane: new MemoryValue<{ consensus: MemberReads } | undefined>(),
  };
  const reader = new ConsensusViewReader(values, { intervalMs: 20 });
  const ctx = new MockContext("root.consensusview");
  const running = reader.run(ctx);
  try {
    expect(reader.latest()).toBeUndefined();
    const socket = await metricsSocket("client.sock", metricsText);
    values.localControlPlane.set({ consensus: member(["2", "1"], "1", 0, socket) });
    await eventually(() => reader.latest(), "a view");
    expect(reader.latest()).toEqual({
      memberIds: ["1", "2"],
      raftLeaderId: "1",
      raftTerm: 7,
      databaseSizeBytes: 20 * 1024 * 1024,
      databaseQuotaBytes: 2 * 1024 * 1024 * 1024,
    });
    values.localControlPlane.set(undefined);
    await eventually(() => reader.latest() === undefined, "the view dropped");
  } finally {
    ctx.abort();
    await running;
  }
});
