/**
 * `logs` and `tree` against a node's Debug service (test/debug-server.ts)
 * over real mTLS, with the node's address found through the real curator.
 */
import { api, common } from "@metropolis/proto";
import { Capture, metroctl, clusterPerFile, type MetroctlCluster } from "./cluster-fixture";
import { logEntry as entry, startDebugServer, type DebugServer } from "./debug-server";
import { eventually } from "@metropolis/supervisor/testing";

let cluster: MetroctlCluster;
let config: string;
const servers: DebugServer[] = [];

clusterPerFile((c, dir) => ((cluster = c), (config = dir)));

afterEach(() => {
  for (const server of servers.splice(0)) server.stop();
});

/** Starts a Debug server and makes `nodeId`'s reported address point at it. */
async function serveDebug(
  nodeId: string,
  handlers: Parameters<typeof startDebugServer>[1],
  as?: Parameters<typeof startDebugServer>[2],
): Promise<DebugServer> {
  const server = await startDebugServer(cluster.leader, handlers, as);
  servers.push(server);
  await cluster.leader.updateNode(nodeId, (n) => ({
    ...n,
    status: common.NodeStatus.fromPartial({ externalAddress: server.host }),
  }));
  return server;
}

describe("logs", () => {
  it("prints the backlog as `time level dn message`, asking for the DN and tail given", async () => {
    const id = cluster.leader.firstNode.nodeId;
    const server = await serveDebug(id, {
      logs: async (call) => {
        call.write({ entries: [entry(1, "info", "root.curator", "leader now")] });
        call.write({
          entries: [entry(2, "warn", "root.curator.listener", "slow", '{"ms":300}')],
        });
      },
    });
    const res = await metroctl(config, [
      "logs",
      id,
      "root.curator",
      "--tail",
      "5",
      "--debug-port",
      String(server.port),
    ]);
    expect(res).toEqual({
      code: 0,
      stderr: "",
      stdout:
        "2024-05-01T12:00:01.000Z info root.curator leader now\n" +
        '2024-05-01T12:00:02.000Z warn root.curator.listener slow {"ms":300}\n',
    });
    expect(server.logRequests).toEqual([{ dnPrefix: "root.curator", tail: 5, follow: false }]);
    expect(server.callers).toEqual(["owner"]);
  });

  it("asks for the whole tree and backlog by default", async () => {
    const id = cluster.leader.firstNode.nodeId;
    const server = await serveDebug(id, { logs: async () => undefined });
    const res = await metroctl(config, ["logs", id, "--debug-port", String(server.port)]);
    expect(res).toEqual({ code: 0, stdout: "", stderr: "" });
    expect(server.logRequests).toEqual([{ dnPrefix: "", tail: undefined, follow: false }]);
  });

  it("follows new lines until interrupted, then ends the stream and exits 0", async () => {
    const id = cluster.leader.firstNode.nodeId;
    let cancelled = false;
    const server = await serveDebug(id, {
      logs: async (call) => {
        call.write({ entries: [entry(1, "info", "root", "first")] });
        await new Promise<void>((resolve) => call.once("cancelled", resolve));
        cancelled = true;
      },
    });
    const stdout = new Capture();
    const interrupt = new AbortController();
    const running = metroctl(
      config,
      ["logs", id, "--follow", "--debug-port", String(server.port)],
      { stdout, signal: interrupt.signal },
    );
    await eventually(() => stdout.text.includes(" first\n"), "the first followed line");
    interrupt.abort();
    const res = await running;
    expect(res).toMatchObject({ code: 0, stderr: "" });
    expect(server.logRequests[0]?.follow).toBe(true);
    await eventually(() => cancelled, "the server to see the stream cancelled");
  });

  it("refuses a node that presents another node's certificate", async () => {
    const impostor = await cluster.leader.addNode();
    // The server at the impostor's address presents the first node's certificate.
    const server = await serveDebug(impostor.nodeId, { logs: async () => undefined });
    const res = await metroctl(config, [
      "logs",
      impostor.nodeId,
      "--debug-port",
      String(server.port),
      "--dial-timeout",
      "5",
    ]);
    expect(res.code).toBe(1);
    expect(res.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(res.stderr).toMatch(
      new RegExp(`^metroctl: logs: UNAVAILABLE: .*expected node ${impostor.nodeId} here`),
    );
    expect(server.logRequests).toEqual([]);
  });

  it("reports a node that is not in the cluster", async () => {
    const missing = "metropolis-" + "ef".repeat(16);
    const res = await metroctl(config, ["logs", missing]);
    expect(res).toMatchObject({ code: 1, stderr: `metroctl: logs: node ${missing} not found\n` });
  });

  it("reports a node without an address", async () => {
    const node = await cluster.leader.addNode();
    const res = await metroctl(config, ["tree", node.nodeId]);
    expect(res).toMatchObject({
      code: 1,
      stderr: `metroctl: tree: node ${node.nodeId} has not reported an address yet\n`,
    });
  });
});

describe("tree", () => {
  const snapshot: api.GetSupervisionTreeResponse = {
    nodes: [
      {
        dn: "root",
        state: api.RunnableState.HEALTHY,
        restarts: 0,
        lastError: "",
        givenUp: false,
        status: "",
      },
      {
        dn: "root.network",
        state: api.RunnableState.DEAD,
        restarts: 2,
        lastError: "no link",
        nextRestartInMs: 800,
        givenUp: false,
        status: "",
      },
      {
        dn: "root.role",
        state: api.RunnableState.HEALTHY,
        restarts: 0,
        lastError: "",
        givenUp: false,
        status: "",
      },
      {
        dn: "root.role.curator",
        state: api.RunnableState.HEALTHY,
        restarts: 0,
        lastError: "",
        givenUp: false,
        // A state machine's runnable: its machine's state (RunContext.status).
        status: "leading.leaseUnconfirmed",
      },
    ],
  };

  it("draws the node's supervision tree, a runnable's state first in DETAIL", async () => {
    const id = cluster.leader.firstNode.nodeId;
    const server = await serveDebug(id, { tree: () => snapshot });
    const res = await metroctl(config, ["tree", id, "--debug-port", String(server.port)]);
    expect(res.code).toBe(0);
    expect(res.stdout.split("\n")).toEqual([
      "RUNNABLE       STATE    RESTARTS  DETAIL",
      "root           HEALTHY  0",
      "├─ network     DEAD     2         restart in 0.8s; last error: no link",
      "└─ role        HEALTHY  0",
      "   └─ curator  HEALTHY  0         state: leading.leaseUnconfirmed",
      "",
    ]);
    expect(server.callers).toEqual(["owner"]);
  });

  it("gives the same tree nested in JSON", async () => {
    const id = cluster.leader.firstNode.nodeId;
    const server = await serveDebug(id, { tree: () => snapshot });
    const res = await metroctl(config, [
      "tree",
      id,
      "-o",
      "json",
      "--debug-port",
      String(server.port),
    ]);
    expect(res.code).toBe(0);
    expect(JSON.parse(res.stdout)).toEqual([
      {
        dn: "root",
        name: "root",
        state: "HEALTHY",
        restarts: 0,
        since: null,
        lastError: null,
        nextRestartInMs: null,
        givenUp: false,
        status: null,
        children: [
          expect.objectContaining({
            name: "network",
            state: "DEAD",
            lastError: "no link",
            children: [],
          }),
          expect.objectContaining({
            name: "role",
            children: [
              expect.objectContaining({
                dn: "root.role.curator",
                name: "curator",
                status: "leading.leaseUnconfirmed",
              }),
            ],
          }),
        ],
      },
    ]);
  });
});

describe("tree --watch", () => {
  const node = (dn: string, state: api.RunnableState, restarts = 0): api.SupervisionNode => ({
    dn,
    state,
    restarts,
    lastError: "",
    givenUp: false,
    status: "",
  });

  it("draws the tree, then again after each change, until interrupted (exit 0)", async () => {
    const id = cluster.leader.firstNode.nodeId;
    let change!: () => void;
    let cancelled = false;
    const server = await serveDebug(id, {
      watch: async (call) => {
        call.write({
          nodes: [node("root", api.RunnableState.HEALTHY), node("root.net", api.RunnableState.NEW)],
        });
        await new Promise<void>((resolve) => (change = resolve));
        call.write({
          nodes: [
            node("root", api.RunnableState.HEALTHY),
            node("root.net", api.RunnableState.HEALTHY, 1),
          ],
        });
        await new Promise<void>((resolve) => call.once("cancelled", resolve));
        cancelled = true;
      },
    });
    const stdout = new Capture();
    const interrupt = new AbortController();
    const running = metroctl(config, ["tree", id, "--watch", "--debug-port", String(server.port)], {
      stdout,
      signal: interrupt.signal,
    });
    await eventually(() => /net\s+NEW/.test(stdout.text), "the first frame");
    expect(stdout.text).not.toMatch(/HEALTHY\s+1/);
    change();
    await eventually(() => /net\s+HEALTHY\s+1/.test(stdout.text), "the redrawn frame");
    interrupt.abort();
    const res = await running;
    expect(res).toMatchObject({ code: 0, stderr: "" });
    // Not a terminal: frames follow each other, a blank line apart.
    expect(stdout.text.split("\n")).toEqual([
      "RUNNABLE  STATE    RESTARTS  DETAIL",
      "root      HEALTHY  0",
      "└─ net    NEW      0",
      "",
      "RUNNABLE  STATE    RESTARTS  DETAIL",
      "root      HEALTHY  0",
      "└─ net    HEALTHY  1",
      "",
    ]);
    await eventually(() => cancelled, "the server to see the watch cancelled");
  });

  it("on a terminal, clears the screen before each frame; with -o json, one document per line", async () => {
    const id = cluster.leader.firstNode.nodeId;
    const server = await serveDebug(id, {
      watch: async (call) => {
        call.write({ nodes: [node("root", api.RunnableState.NEW)] });
        call.write({ nodes: [node("root", api.RunnableState.HEALTHY)] });
        await new Promise<void>((resolve) => call.once("cancelled", resolve));
      },
    });
    const watch = async (stdout: Capture, extra: string[] = []) => {
      const interrupt = new AbortController();
      const running = metroctl(
        config,
        ["tree", id, "--watch", ...extra, "--debug-port", String(server.port)],
        { stdout, signal: interrupt.signal },
      );
      await eventually(() => stdout.text.includes("HEALTHY"), "the second frame");
      interrupt.abort();
      expect(await running).toMatchObject({ code: 0, stderr: "" });
    };
    const terminal = new Capture();
    terminal.isTTY = true;
    await watch(terminal);
    const frames = terminal.text.split("\x1b[H\x1b[2J");
    expect(frames[0]).toBe("");
    expect(frames.slice(1).map((f) => f.split("\n")[1])).toEqual([
      "root      NEW    0",
      "root      HEALTHY  0",
    ]);
    const json = new Capture();
    await watch(json, ["-o", "json"]);
    const docs = json.text
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as { state: string }[]);
    expect(docs.map((d) => d.map((n) => n.state))).toEqual([["NEW"], ["HEALTHY"]]);
  });
});

describe("reports", () => {
  const at = (seconds: number) => new Date(Date.UTC(2024, 4, 1, 12, 0, seconds));
  const report = (r: Partial<api.SupervisorReport>): api.SupervisorReport => ({
    ...api.SupervisorReport.fromPartial({
      seq: 1,
      dn: "root",
      kind: api.SupervisorReportKind.STARTED,
    }),
    ...r,
  });
  const backlog: api.SupervisorReport[] = [
    report({
      seq: 7,
      time: at(1),
      dn: "root.net",
      kind: api.SupervisorReportKind.STARTED,
      restarts: 2,
    }),
    report({
      seq: 8,
      time: at(2),
      dn: "root.net",
      kind: api.SupervisorReportKind.DIED,
      error: {
        name: "ProcessExitedError",
        message: "exited with 1\nmore",
        stack: "ProcessExitedError: …",
      },
    }),
    report({
      seq: 9,
      time: at(2),
      dn: "root.net",
      kind: api.SupervisorReportKind.RESTART_SCHEDULED,
      delayMs: 750,
      attempt: 3,
      dropped: 4,
    }),
    report({
      seq: 10,
      time: at(3),
      dn: "root.net.dhcp",
      kind: api.SupervisorReportKind.GIVEN_UP,
      maxRestarts: 5,
      periodMs: 10_000,
      error: { name: "Error", message: "no lease", stack: "" },
    }),
    report({
      seq: 11,
      time: at(3),
      dn: "root.net.dhcp",
      kind: api.SupervisorReportKind.ESCALATED,
      escalatedTo: "root.net",
      error: { name: "EscalationError", message: "gave up", stack: "" },
    }),
  ];

  it("prints the kept reports as `time kind dn detail`, asking for the DN and backlog given", async () => {
    const id = cluster.leader.firstNode.nodeId;
    const server = await serveDebug(id, {
      reports: async (call) => {
        call.write({ reports: backlog.slice(0, 2) });
        call.write({ reports: backlog.slice(2) });
      },
    });
    const res = await metroctl(config, [
      "reports",
      id,
      "--dn",
      "root.net",
      "--backlog",
      "20",
      "--debug-port",
      String(server.port),
    ]);
    expect(res).toEqual({
      code: 0,
      stderr: "",
      stdout:
        "2024-05-01T12:00:01.000Z started root.net restart 2\n" +
        "2024-05-01T12:00:02.000Z died root.net ProcessExitedError: exited with 1\n" +
        "2024-05-01T12:00:02.000Z restart-scheduled root.net in 750 ms (attempt 3) (4 reports dropped before this one)\n" +
        "2024-05-01T12:00:03.000Z given-up root.net.dhcp more than 5 restarts in 10000 ms; last error Error: no lease\n" +
        "2024-05-01T12:00:03.000Z escalated root.net.dhcp to root.net; EscalationError: gave up\n",
    });
    expect(server.reportRequests).toEqual([{ dnPrefix: "root.net", backlog: 20, follow: false }]);
    expect(server.callers).toEqual(["owner"]);
  });

  it("prints JSON lines with -o json, the error's stack included", async () => {
    const id = cluster.leader.firstNode.nodeId;
    const server = await serveDebug(id, {
      reports: async (call) => void call.write({ reports: backlog.slice(1, 2) }),
    });
    const res = await metroctl(config, [
      "reports",
      id,
      "-o",
      "json",
      "--debug-port",
      String(server.port),
    ]);
    expect(res.code).toBe(0);
    expect(
      res.stdout
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l) as unknown),
    ).toEqual([
      {
        seq: 8,
        time: "2024-05-01T12:00:02.000Z",
        kind: "died",
        dn: "root.net",
        error: {
          name: "ProcessExitedError",
          message: "exited with 1\nmore",
          stack: "ProcessExitedError: …",
        },
      },
    ]);
    expect(server.reportRequests).toEqual([{ dnPrefix: "", backlog: undefined, follow: false }]);
  });

  it("follows new reports with -f until interrupted, then ends the stream and exits 0", async () => {
    const id = cluster.leader.firstNode.nodeId;
    let next!: () => void;
    let cancelled = false;
    const server = await serveDebug(id, {
      reports: async (call) => {
        call.write({ reports: backlog.slice(0, 1) });
        await new Promise<void>((resolve) => (next = resolve));
        call.write({ reports: backlog.slice(1, 2) });
        await new Promise<void>((resolve) => call.once("cancelled", resolve));
        cancelled = true;
      },
    });
    const stdout = new Capture();
    const interrupt = new AbortController();
    const running = metroctl(config, ["reports", id, "-f", "--debug-port", String(server.port)], {
      stdout,
      signal: interrupt.signal,
    });
    await eventually(() => stdout.text.includes(" started root.net"), "the backlog");
    next();
    await eventually(() => stdout.text.includes(" died root.net"), "the followed report");
    interrupt.abort();
    expect(await running).toMatchObject({ code: 0, stderr: "" });
    expect(server.reportRequests[0]?.follow).toBe(true);
    await eventually(() => cancelled, "the server to see the stream cancelled");
  });
});
