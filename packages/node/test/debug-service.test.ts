/**
 * The Debug service against a real supervision tree, served by a real
 * grpc-js server over the curator's mutual TLS, with certificates of a
 * throwaway cluster CA.
 */
import { getEventListeners } from "node:events";
import {
  Server,
  status,
  type ChannelCredentials,
  type ClientReadableStream,
  type ServiceError,
} from "@grpc/grpc-js";
import { freePort } from "@metropolis/consensus/testing";
import {
  curatorClientCredentials,
  curatorServerCredentials,
  identifier,
  Revocations,
  maxQuotedLength,
  serverLimits,
  BoundedStreams,
} from "@metropolis/curator";
import {
  CertificateAuthority,
  createEphemeralCertificate,
  generateKeyPair,
  tlsMaterial,
} from "@metropolis/pki";
import { api } from "@metropolis/proto";
import type { Logger, RunContext, Supervisor } from "@metropolis/supervisor";
import { eventually, testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import {
  debugServer,
  defaultDebugPort,
  maxDnPrefixLength,
  maxLogEntriesPerResponse,
  maxPendingFollowedEntries,
  type ConditionSource,
} from "../src/debug-service";

type Identity = "self" | "node" | "owner" | "ephemeral" | "foreign" | "revoked" | "none";

const deadlineMs = 10_000;
/** How `eventually` polls here: counts of in-process subscriptions change within a few ms. */
const pollFast = { timeoutMs: deadlineMs, intervalMs: 5 };

/** Expects `p` to fail with gRPC status `code` and a message matching `message`. */
async function expectCode(p: Promise<unknown>, code: status, message: RegExp): Promise<void> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e as ServiceError,
  );
  expect(error).toBeDefined();
  expect(status[error!.code]).toBe(status[code]);
  expect(error!.details).toMatch(message);
}

/** The responses of a GetLogs stream that ends by itself. */
function readAll(
  stream: ClientReadableStream<api.GetLogsResponse>,
): Promise<api.GetLogsResponse[]> {
  return new Promise((resolve, reject) => {
    const responses: api.GetLogsResponse[] = [];
    stream.on("data", (r: api.GetLogsResponse) => responses.push(r));
    stream.on("error", reject);
    stream.on("end", () => resolve(responses));
  });
}

/** A GetLogs stream read as it arrives, for follow tests. */
function inbox(stream: ClientReadableStream<api.GetLogsResponse>) {
  const batches: api.LogEntry[][] = [];
  let ended: { code: status; details: string } | undefined;
  stream.on("data", (r: api.GetLogsResponse) => batches.push(r.entries));
  stream.on("error", (e: ServiceError) => (ended = { code: e.code, details: e.details }));
  stream.on("status", (s: { code: status; details: string }) => (ended ??= s));
  const entries = () => batches.flat();
  return {
    batches,
    entries,
    messages: () => entries().map((e) => e.message),
    ended: () => ended,
    async waitForEntries(n: number) {
      await eventually(
        () => entries().length >= n || ended !== undefined,
        `${n} entries`,
        pollFast,
      );
      expect(entries().length).toBeGreaterThanOrEqual(n);
    },
    async waitForEnd() {
      await eventually(() => ended !== undefined, "the stream to end", pollFast);
      return ended!;
    },
  };
}

const messagesOf = (responses: api.GetLogsResponse[]) =>
  responses.flatMap((r) => r.entries.map((e) => e.message));

// ── The cluster's certificates ─────────────────────────────────────────────

let caPem: string;
let serverTls: { cert: string; key: string; ca: string };
let clientTls: Record<Exclude<Identity, "none">, { cert: string; key: string }>;
let identify: ReturnType<typeof identifier>;

beforeAll(async () => {
  const ca = await CertificateAuthority.create();
  const foreignCa = await CertificateAuthority.create();
  caPem = ca.certificate.toPem();
  const self = generateKeyPair();
  const node = generateKeyPair();
  const owner = generateKeyPair();
  const ephemeral = generateKeyPair();
  const foreign = generateKeyPair();
  serverTls = tlsMaterial({
    certificate: await ca.issueNodeCertificate(self.publicKey),
    privateKey: self.privateKey,
    ca: ca.certificate,
  });
  const ephemeralCertificate = await createEphemeralCertificate(ephemeral.privateKey);
  // A node of the cluster that was deleted: its certificate is in the CA's CRL.
  const deleted = generateKeyPair();
  const deletedCertificate = await ca.issueNodeCertificate(deleted.publicKey);
  const revocations = new Revocations(ca.certificate.der);
  await revocations.offer((await ca.revoke(await ca.createCrl(), deletedCertificate.serial)).der);
  identify = identifier(ca.certificate.der, revocations);
  clientTls = {
    self: serverTls,
    node: tlsMaterial({
      certificate: await ca.issueNodeCertificate(node.publicKey),
      privateKey: node.privateKey,
      ca: ca.certificate,
    }),
    owner: tlsMaterial({
      certificate: await ca.issueUserCertificate("owner", owner.publicKey),
      privateKey: owner.privateKey,
      ca: ca.certificate,
    }),
    ephemeral: tlsMaterial({
      certificate: ephemeralCertificate,
      privateKey: ephemeral.privateKey,
      ca: ephemeralCertificate,
    }),
    foreign: tlsMaterial({
      certificate: await foreignCa.issueNodeCertificate(foreign.publicKey),
      privateKey: foreign.privateKey,
      ca: foreignCa.certificate,
    }),
    revoked: tlsMaterial({
      certificate: deletedCertificate,
      privateKey: deleted.privateKey,
      ca: ca.certificate,
    }),
  };
});

// ── A node-shaped tree and its Debug service ──────────────────────────────

let h: TestHarness;
/** Loggers of the tree's runnables, to log lines from the test. */
let loggers: Record<"role" | "curator" | "roles" | "bulk", Logger>;
let failFlaky: () => void;
/** GetLogs follow subscriptions currently open on the supervisor (0 between tests). */
let following = 0;
let conditionCalls: api.Condition[];
let servers: Server[];
let clients: api.DebugClient[];
let address: string;

async function serve(ctx: RunContext): Promise<void> {
  ctx.healthy();
  await ctx.untilAborted();
}

/** Report and tree iterators the supervisor handed out and that were not returned yet. */
let iterating = 0;

/** `it`, counted in `iterating` until its return() is called. */
function tracked<T>(it: AsyncIterableIterator<T>): AsyncIterableIterator<T> {
  iterating++;
  let on = true;
  const wrapped: AsyncIterableIterator<T> = {
    next: () => it.next(),
    return: () => {
      if (on) iterating--;
      on = false;
      return it.return?.() ?? Promise.resolve({ value: undefined, done: true });
    },
    [Symbol.asyncIterator]: () => wrapped,
  };
  return wrapped;
}

/** The supervisor, counting the log subscriptions and iterators it hands out. */
function counting(sup: Supervisor): Supervisor {
  return {
    get done() {
      return sup.done;
    },
    stop: (o) => sup.stop(o),
    tree: () => sup.tree(),
    onTransition: (cb) => sup.onTransition(cb),
    logs: (prefix, o) => sup.logs(prefix, o),
    reports: (o) => tracked(sup.reports(o)),
    onReport: (cb) => sup.onReport(cb),
    recentReports: (o) => sup.recentReports(o),
    watchTree: () => tracked(sup.watchTree()),
    topRestarts: (o) => sup.topRestarts(o),
    onLog: (cb) => {
      following++;
      const off = sup.onLog(cb);
      let on = true;
      return () => {
        if (on) following--;
        on = false;
        off();
      };
    },
  };
}

const conditions: ConditionSource = (c) => {
  conditionCalls.push(c);
  switch (c) {
    case api.Condition.STORAGE_MOUNTED:
      return { ok: true };
    case api.Condition.CLUSTER_HOME:
      return { ok: false, detail: "cluster state is FOREIGN" };
    case api.Condition.CONSENSUS_RUNNING:
      throw new Error("consensus status unavailable");
    default:
      return Promise.resolve({ ok: true, detail: "checked asynchronously" });
  }
};

/** Serves the Debug service on a free port of 127.0.0.1; returns its address. */
async function startServer(signal?: AbortSignal, followStreams?: BoundedStreams): Promise<string> {
  const server = new Server(serverLimits());
  servers.push(server);
  server.addService(
    api.DebugService,
    debugServer({
      supervisor: counting(h.supervisor),
      conditions,
      identify,
      signal,
      followStreams,
    }),
  );
  const port = await freePort("127.0.0.1");
  await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${port}`, curatorServerCredentials(serverTls), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  return `127.0.0.1:${port}`;
}

function client(identity: Identity, at = address): api.DebugClient {
  const creds: ChannelCredentials = curatorClientCredentials(
    caPem,
    identity === "none" ? undefined : clientTls[identity],
  );
  const c = new api.DebugClient(at, creds);
  clients.push(c);
  return c;
}

const supervisionTree = (c: api.DebugClient) =>
  new Promise<api.GetSupervisionTreeResponse>((resolve, reject) =>
    c.getSupervisionTree({}, (e, r) => (e ? reject(e) : resolve(r))),
  );

const condition = (c: api.DebugClient, which: api.Condition) =>
  new Promise<api.GetConditionResponse>((resolve, reject) =>
    c.getCondition({ condition: which }, (e, r) => (e ? reject(e) : resolve(r))),
  );

const logs = (c: api.DebugClient, req: Partial<api.GetLogsRequest>) =>
  readAll(c.getLogs({ dnPrefix: "", follow: false, ...req }));

beforeEach(async () => {
  conditionCalls = [];
  servers = [];
  clients = [];
  loggers = {} as typeof loggers;
  let flakyRuns = 0;
  h = testHarness(
    async (ctx) => {
      ctx.run("role", async (c) => {
        loggers.role = c.logger;
        c.logger.info("role 1");
        c.run("curator", async (cc) => {
          loggers.curator = cc.logger;
          cc.logger.info("curator 1", { port: 7835 });
          cc.status("leading.leaseConfirmed");
          await serve(cc);
        });
        c.logger.info("role 2");
        await serve(c);
      });
      ctx.run("roles", async (c) => {
        loggers.roles = c.logger;
        c.logger.info("roles 1");
        await serve(c);
      });
      ctx.run("flaky", async (c) => {
        flakyRuns++;
        c.healthy();
        if (flakyRuns > 1) return c.untilAborted();
        await new Promise<void>((resolve, reject) => {
          failFlaky = () => reject(new Error("flaky failed on purpose"));
          void c.untilAborted().then(resolve);
        });
      });
      ctx.run(
        "broken",
        async () => {
          throw new Error("always broken");
        },
        { backoff: { initialMs: 60_000, jitter: 0 } },
      );
      ctx.run("oneshot", async (c) => (c.healthy(), c.done()));
      ctx.run("bulk", async (c) => ((loggers.bulk = c.logger), serve(c)));
      await serve(ctx);
    },
    {
      expectDeath: (dn) => dn === "root.flaky" || dn === "root.broken",
      logBufferLines: 2000,
    },
  );
  await h.waitFor("root", "healthy");
  await h.waitFor("root.broken", "dead");
  address = await startServer();
});

afterEach(async () => {
  try {
    for (const c of clients) c.close();
    for (const s of servers) s.forceShutdown();
    // A server going away lets go of its follow subscriptions.
    await eventually(() => following === 0, "every follow subscription to end", pollFast);
    await eventually(() => iterating === 0, "every report and tree iterator to end", pollFast);
  } finally {
    following = 0;
    iterating = 0;
    await h.cleanup();
  }
});

// ── The tests ─────────────────────────────────────────────────────────────

describe("GetLogs", () => {
  it("sends the DN prefix's subtree, oldest first, not DNs that only share its first letters", async () => {
    const c = client("owner");
    const role = await logs(c, { dnPrefix: "root.role" });
    const entries = role.flatMap((r) => r.entries);
    expect(entries.map((e) => `${e.dn}: ${e.message}`)).toEqual([
      "root.role: role 1",
      "root.role.curator: curator 1",
      "root.role: role 2",
    ]);
    expect(entries[1].metaJson).toBe('{"port":7835}');
    expect(entries[0].metaJson).toBe("");
    expect(entries[0].level).toBe("info");
    expect(entries[0].time).toBeInstanceOf(Date);
    expect(Math.abs(entries[0].time!.getTime() - Date.now())).toBeLessThan(60_000);

    expect(messagesOf(await logs(c, { dnPrefix: "root.roles" }))).toEqual(["roles 1"]);
    expect(messagesOf(await logs(c, { dnPrefix: "root.rol" }))).toEqual([]);
    expect(messagesOf(await logs(c, { dnPrefix: "root.role.curator" }))).toEqual(["curator 1"]);
    // Empty: the whole tree, including the failure the supervisor logged.
    const all = (await logs(c, { dnPrefix: "" })).flatMap((r) => r.entries);
    expect(all.map((e) => e.message)).toEqual(
      expect.arrayContaining(["role 1", "curator 1", "role 2", "roles 1"]),
    );
    const failure = all.find((e) => e.dn === "root.broken" && e.level === "error");
    expect(failure?.message).toContain("always broken");
    expect(JSON.parse(failure!.metaJson).stack).toContain("always broken");
  });

  it("sends the last `tail` entries: all when unset, none for 0", async () => {
    const c = client("owner");
    expect(messagesOf(await logs(c, { dnPrefix: "root.role", tail: 2 }))).toEqual([
      "curator 1",
      "role 2",
    ]);
    expect(messagesOf(await logs(c, { dnPrefix: "root.role", tail: 100 }))).toEqual([
      "role 1",
      "curator 1",
      "role 2",
    ]);
    expect(messagesOf(await logs(c, { dnPrefix: "root.role" }))).toHaveLength(3);
    // No entries, and no empty responses either.
    expect(await logs(c, { dnPrefix: "root.role", tail: 0 })).toEqual([]);
  });

  it("batches a large backlog, in order, by count and by size", async () => {
    const lines = Array.from({ length: 1200 }, (_, i) => `bulk ${i}`);
    for (const line of lines) loggers.bulk.info(line);
    const c = client("owner");
    const responses = await logs(c, { dnPrefix: "root.bulk" });
    expect(responses.map((r) => r.entries.length)).toEqual([
      maxLogEntriesPerResponse,
      maxLogEntriesPerResponse,
      1200 - 2 * maxLogEntriesPerResponse,
    ]);
    expect(messagesOf(responses)).toEqual(lines);

    // Three lines of 600 KB: no two fit in one response under its ~1 MiB bound.
    const big = ["a", "b", "c"].map((ch) => ch.repeat(600 * 1024));
    for (const line of big) loggers.bulk.info(line);
    const bigResponses = await logs(c, { dnPrefix: "root.bulk", tail: 3 });
    expect(bigResponses.map((r) => r.entries.length)).toEqual([1, 1, 1]);
    expect(messagesOf(bigResponses)).toEqual(big);
  });

  it("with follow, sends new matching entries as they are logged, until the client cancels", async () => {
    const stream = client("owner").getLogs({ dnPrefix: "root.role", tail: 1, follow: true });
    const box = inbox(stream);
    await box.waitForEntries(1);
    expect(box.messages()).toEqual(["role 2"]);
    expect(following).toBe(1);

    // Logged after the call started; the root.roles line must not match root.role.
    loggers.roles.info("roles late");
    loggers.curator.info("curator late");
    loggers.role.info("role late");
    await box.waitForEntries(3);
    expect(box.messages()).toEqual(["role 2", "curator late", "role late"]);
    // The lines logged in one tick arrive in one response.
    expect(box.batches.map((b) => b.length)).toEqual([1, 2]);

    loggers.role.info("one more");
    await box.waitForEntries(4);
    expect(box.messages()[3]).toBe("one more");
    expect(box.ended()).toBeUndefined();

    stream.cancel();
    expect((await box.waitForEnd()).code).toBe(status.CANCELLED);
    // The server lets go of the subscription.
    await eventually(() => following === 0, "the follow subscription to end", pollFast);
  });

  it("with follow, sends a burst in bounded batches, in order", async () => {
    const box = inbox(client("node").getLogs({ dnPrefix: "root.bulk", tail: 0, follow: true }));
    await eventually(() => following === 1, "the follow subscription", pollFast);
    const lines = Array.from({ length: 1100 }, (_, i) => `burst ${i}`);
    for (const line of lines) loggers.bulk.info(line);
    await box.waitForEntries(lines.length);
    expect(box.messages()).toEqual(lines);
    for (const b of box.batches) expect(b.length).toBeLessThanOrEqual(maxLogEntriesPerResponse);
  });

  it("ends a follow stream with RESOURCE_EXHAUSTED when entries pile up past the limit", async () => {
    const box = inbox(client("owner").getLogs({ dnPrefix: "root.bulk", tail: 0, follow: true }));
    await eventually(() => following === 1, "the follow subscription", pollFast);
    // All logged in one tick: none can be sent before the limit is passed.
    for (let i = 0; i <= maxPendingFollowedEntries; i++) loggers.bulk.info(`flood ${i}`);
    const end = await box.waitForEnd();
    expect(status[end.code]).toBe(status[status.RESOURCE_EXHAUSTED]);
    expect(end.details).toMatch(/too slowly/);
    await eventually(() => following === 0, "the follow subscription to end", pollFast);
  });

  it("ends follow streams with OK when the service's signal aborts", async () => {
    const controller = new AbortController();
    const at = await startServer(controller.signal);
    const box = inbox(client("owner", at).getLogs({ dnPrefix: "root", tail: 1, follow: true }));
    await box.waitForEntries(1);
    controller.abort();
    expect((await box.waitForEnd()).code).toBe(status.OK);
    await eventually(() => following === 0, "the follow subscription to end", pollFast);
  });
});

describe("GetLogs bounds", () => {
  it("refuses a DN prefix longer than the limit, quoting only its start", async () => {
    const prefix = "root." + "x".repeat(100_000);
    await expectCode(
      logs(client("owner"), { dnPrefix: prefix }),
      status.INVALID_ARGUMENT,
      new RegExp(
        `^dn_prefix "root\\.x{${maxQuotedLength - 5}}"\\.\\.\\. \\(${prefix.length} characters\\) is longer than ${maxDnPrefixLength} characters$`,
      ),
    );
    // Up to the limit, a prefix is only a prefix: it matches nothing here.
    expect(await logs(client("owner"), { dnPrefix: "x".repeat(maxDnPrefixLength) })).toEqual([]);
  });

  it("caps followed streams per connection and in total, and ends them through one listener on the signal", async () => {
    const controller = new AbortController();
    const followStreams = new BoundedStreams(
      "followed GetLogs",
      { perConnection: 6, total: 11 },
      controller.signal,
    );
    const at = await startServer(controller.signal, followStreams);
    const [a, b] = [client("owner", at), client("node", at)];
    const follow = (c: api.DebugClient) =>
      inbox(c.getLogs({ dnPrefix: "root.role", tail: 1, follow: true }));
    const onA = Array.from({ length: 6 }, () => follow(a));
    for (const box of onA) await box.waitForEntries(1);
    const refusedA = follow(a);
    const perConnection = await refusedA.waitForEnd();
    expect(status[perConnection.code]).toBe("RESOURCE_EXHAUSTED");
    expect(perConnection.details).toMatch(/this connection has 6/);
    const onB = Array.from({ length: 5 }, () => follow(b));
    for (const box of onB) await box.waitForEntries(1);
    const total = await follow(b).waitForEnd();
    expect(status[total.code]).toBe("RESOURCE_EXHAUSTED");
    expect(total.details).toMatch(/this server has 11/);
    expect(following).toBe(11);
    // Eleven streams, and the service's signal has one listener for them all
    // (Node warns of a leak past ten).
    expect(getEventListeners(controller.signal, "abort").length).toBeLessThanOrEqual(1);
    // Unfollowed GetLogs are not capped.
    expect(messagesOf(await logs(a, { dnPrefix: "root.role", tail: 1 }))).toHaveLength(1);
    controller.abort();
    for (const box of [...onA, ...onB]) expect((await box.waitForEnd()).code).toBe(status.OK);
    await eventually(() => following === 0, "every follow subscription to end", pollFast);
    expect(followStreams.size).toBe(0);
  });
});

describe("GetSupervisionTree", () => {
  it("reports every DN with its state, restarts, last error, pending restart and status", async () => {
    await h.waitFor("root.flaky", "healthy");
    await h.waitFor("root.oneshot", "done");
    const restarted = h.nextTransition(
      (t) => t.dn === "root.flaky" && t.from === "new" && t.to === "healthy",
    );
    failFlaky();
    await restarted;

    const { nodes } = await supervisionTree(client("self"));
    expect(nodes.map((n) => n.dn)).toEqual(h.supervisor.tree().map((n) => n.dn));
    expect(nodes.map((n) => n.dn)).toEqual([
      "root",
      "root.role",
      "root.role.curator",
      "root.roles",
      "root.flaky",
      "root.broken",
      "root.oneshot",
      "root.bulk",
    ]);
    const byDn = new Map(nodes.map((n) => [n.dn, n]));
    expect(byDn.get("root.role.curator")).toMatchObject({
      state: api.RunnableState.HEALTHY,
      restarts: 0,
      lastError: "",
      nextRestartInMs: undefined,
      givenUp: false,
      status: "leading.leaseConfirmed",
    });
    // A runnable that published no status: empty, as the wire says "none".
    expect(byDn.get("root.role")?.status).toBe("");
    expect(byDn.get("root.flaky")).toMatchObject({
      state: api.RunnableState.HEALTHY,
      restarts: 1,
      lastError: "flaky failed on purpose",
      nextRestartInMs: undefined,
    });
    const broken = byDn.get("root.broken")!;
    expect(broken).toMatchObject({
      state: api.RunnableState.DEAD,
      restarts: 0,
      lastError: "always broken",
    });
    expect(broken.nextRestartInMs).toBeGreaterThan(30_000);
    expect(broken.nextRestartInMs).toBeLessThanOrEqual(60_000);
    expect(byDn.get("root.oneshot")?.state).toBe(api.RunnableState.DONE);
    for (const n of nodes) {
      expect(n.since).toBeInstanceOf(Date);
      expect(n.since!.getTime()).toBeLessThanOrEqual(Date.now());
    }
    const flakySince = h.supervisor.tree().find((n) => n.dn === "root.flaky")!.since;
    expect(byDn.get("root.flaky")!.since!.getTime()).toBe(flakySince);
  });
});

/** A server stream read as it arrives. */
function streamInbox<T>(stream: ClientReadableStream<T>) {
  const messages: T[] = [];
  let ended: { code: status; details: string } | undefined;
  stream.on("data", (m: T) => messages.push(m));
  stream.on("error", (e: ServiceError) => (ended = { code: e.code, details: e.details }));
  stream.on("status", (s: { code: status; details: string }) => (ended ??= s));
  return {
    messages,
    ended: () => ended,
    async waitFor(what: string, check: (messages: T[]) => boolean) {
      await eventually(() => check(messages) || ended !== undefined, what, pollFast);
      expect(ended).toBeUndefined();
    },
    async waitForEnd() {
      await eventually(() => ended !== undefined, "the stream to end", pollFast);
      return ended!;
    },
  };
}

const K = api.SupervisorReportKind;
const reportsOf = (responses: api.GetSupervisorReportsResponse[]) =>
  responses.flatMap((r) => r.reports);

describe("GetSupervisorReports", () => {
  const readReports = (c: api.DebugClient, req: Partial<api.GetSupervisorReportsRequest>) =>
    new Promise<api.GetSupervisorReportsResponse[]>((resolve, reject) => {
      const out: api.GetSupervisorReportsResponse[] = [];
      const stream = c.getSupervisorReports({ dnPrefix: "", follow: false, ...req });
      stream.on("data", (r: api.GetSupervisorReportsResponse) => out.push(r));
      stream.on("error", reject);
      stream.on("end", () => resolve(out));
    });

  it("sends the kept reports of the DN prefix's subtree, with their fields", async () => {
    const reports = reportsOf(await readReports(client("owner"), { dnPrefix: "root.broken" }));
    expect(reports.map((r) => [r.dn, K[r.kind]])).toEqual([
      ["root.broken", "STARTED"],
      ["root.broken", "DIED"],
      ["root.broken", "RESTART_SCHEDULED"],
    ]);
    const [started, died, scheduled] = reports;
    expect(started).toMatchObject({ restarts: 0, dropped: 0 });
    expect(died.error).toMatchObject({ name: "Error", message: "always broken" });
    expect(died.error?.stack).toMatch(/^Error: always broken\n\s+at /);
    expect(scheduled).toMatchObject({ delayMs: 60_000, attempt: 1, error: undefined });
    expect(died.seq).toBeGreaterThan(started.seq);
    expect(died.time).toBeInstanceOf(Date);
    expect(died.time!.getTime()).toBe(
      h.supervisor.recentReports({ dnPrefix: "root.broken" })[1].time,
    );
    // `root.role` covers root.role.curator and not root.roles; backlog keeps the newest.
    const role = reportsOf(await readReports(client("node"), { dnPrefix: "root.role" }));
    expect(new Set(role.map((r) => r.dn))).toEqual(new Set(["root.role", "root.role.curator"]));
    const last = reportsOf(
      await readReports(client("node"), { dnPrefix: "root.role", backlog: 1 }),
    );
    expect(last).toEqual(role.slice(-1));
    expect(await readReports(client("node"), { backlog: 0 })).toEqual([]);
  });

  it("with follow, sends new reports as they are made until the client cancels", async () => {
    await h.waitFor("root.flaky", "healthy");
    const stream = client("owner").getSupervisorReports({
      dnPrefix: "root.flaky",
      backlog: 1,
      follow: true,
    });
    const box = streamInbox(stream);
    await box.waitFor("the backlog", (m) => m.length >= 1);
    expect(reportsOf(box.messages).map((r) => K[r.kind])).toEqual(["HEALTHY"]);
    failFlaky();
    await box.waitFor("the restart's reports", (m) => reportsOf(m).length >= 5);
    const followed = reportsOf(box.messages).slice(1);
    expect(followed.map((r) => K[r.kind])).toEqual([
      "DIED",
      "RESTART_SCHEDULED",
      "STARTED",
      "HEALTHY",
    ]);
    expect(followed[0].error?.message).toBe("flaky failed on purpose");
    expect(followed[2].restarts).toBe(1);
    expect(iterating).toBe(1);
    stream.cancel();
    expect((await box.waitForEnd()).code).toBe(status.CANCELLED);
    await eventually(() => iterating === 0, "the server to let go of the reports", pollFast);
  });

  it("refuses a DN prefix longer than the limit", async () => {
    await expectCode(
      readReports(client("owner"), { dnPrefix: "x".repeat(maxDnPrefixLength + 1) }),
      status.INVALID_ARGUMENT,
      /is longer than 1024 characters$/,
    );
  });
});

describe("WatchSupervisionTree", () => {
  it("sends the tree, then again after changes, until the client cancels", async () => {
    await h.waitFor("root.flaky", "healthy");
    const stream = client("owner").watchSupervisionTree({});
    const box = streamInbox(stream);
    await box.waitFor("the first snapshot", (m) => m.length >= 1);
    const flakyOf = (m: api.WatchSupervisionTreeResponse) =>
      m.nodes.find((n) => n.dn === "root.flaky");
    expect(box.messages[0].nodes.map((n) => n.dn)).toEqual(h.supervisor.tree().map((n) => n.dn));
    expect(flakyOf(box.messages[0])).toMatchObject({
      restarts: 0,
      state: api.RunnableState.HEALTHY,
    });
    failFlaky();
    await box.waitFor("the restarted runnable", (m) => {
      const flaky = flakyOf(m[m.length - 1]);
      return flaky?.restarts === 1 && flaky.state === api.RunnableState.HEALTHY;
    });
    // Coalesced per turn of the event loop: the death and its scheduled
    // restart are one turn, the restart and healthy() another: two snapshots.
    expect(box.messages.length - 1).toBeLessThanOrEqual(2);
    expect(iterating).toBe(1);
    stream.cancel();
    expect((await box.waitForEnd()).code).toBe(status.CANCELLED);
    await eventually(() => iterating === 0, "the server to let go of the watch", pollFast);
  });

  it("shares the long-lived stream caps with followed GetLogs and GetSupervisorReports, and ends with the signal", async () => {
    const controller = new AbortController();
    const streams = new BoundedStreams(
      "long-lived Debug",
      { perConnection: 3, total: 3 },
      controller.signal,
    );
    const at = await startServer(controller.signal, streams);
    const c = client("owner", at);
    const watch = streamInbox(c.watchSupervisionTree({}));
    const reports = streamInbox(c.getSupervisorReports({ dnPrefix: "", backlog: 1, follow: true }));
    const logsBox = inbox(c.getLogs({ dnPrefix: "root", tail: 1, follow: true }));
    await watch.waitFor("a snapshot", (m) => m.length >= 1);
    await reports.waitFor("a report", (m) => m.length >= 1);
    await logsBox.waitForEntries(1);
    const refused = await streamInbox(c.watchSupervisionTree({})).waitForEnd();
    expect(status[refused.code]).toBe("RESOURCE_EXHAUSTED");
    expect(refused.details).toMatch(/too many open long-lived Debug streams/);
    controller.abort();
    expect((await watch.waitForEnd()).code).toBe(status.OK);
    expect((await reports.waitForEnd()).code).toBe(status.OK);
    expect((await logsBox.waitForEnd()).code).toBe(status.OK);
    await eventually(() => iterating === 0, "every iterator to end", pollFast);
    expect(streams.size).toBe(0);
  });
});

describe("GetCondition", () => {
  it("answers from the node's condition source", async () => {
    const c = client("node");
    expect(await condition(c, api.Condition.STORAGE_MOUNTED)).toEqual({ ok: true, detail: "" });
    expect(await condition(c, api.Condition.CLUSTER_HOME)).toEqual({
      ok: false,
      detail: "cluster state is FOREIGN",
    });
    expect(await condition(c, api.Condition.CURATOR_CONNECTED)).toEqual({
      ok: true,
      detail: "checked asynchronously",
    });
    await expectCode(
      condition(c, api.Condition.CONSENSUS_RUNNING),
      status.INTERNAL,
      /consensus status unavailable/,
    );
  });

  it("refuses an unset or unknown condition without asking the source", async () => {
    const c = client("owner");
    await expectCode(
      condition(c, api.Condition.UNSPECIFIED),
      status.INVALID_ARGUMENT,
      /condition is unset/,
    );
    await expectCode(
      condition(c, 99 as api.Condition),
      status.INVALID_ARGUMENT,
      /unknown condition 99/,
    );
    expect(conditionCalls).toEqual([]);
  });
});

describe("access", () => {
  it("lets the node itself, other nodes and the owner in", async () => {
    for (const who of ["self", "node", "owner"] as const) {
      const c = client(who);
      expect((await supervisionTree(c)).nodes[0].dn).toBe("root");
      expect(messagesOf(await logs(c, { dnPrefix: "root.roles" }))).toEqual(["roles 1"]);
      expect((await condition(c, api.Condition.STORAGE_MOUNTED)).ok).toBe(true);
    }
  });

  it("refuses a registering node's self-signed certificate with PERMISSION_DENIED", async () => {
    const c = client("ephemeral");
    const why = /needs a node or owner certificate of this cluster, not an ephemeral one/;
    await expectCode(supervisionTree(c), status.PERMISSION_DENIED, why);
    await expectCode(logs(c, { dnPrefix: "root" }), status.PERMISSION_DENIED, why);
    await expectCode(condition(c, api.Condition.STORAGE_MOUNTED), status.PERMISSION_DENIED, why);
    expect(conditionCalls).toEqual([]);
  });

  it("refuses callers without a certificate, or with another cluster's, as UNAUTHENTICATED", async () => {
    const none = client("none");
    const missing = /needs a node or owner certificate of this cluster; none was presented/;
    await expectCode(supervisionTree(none), status.UNAUTHENTICATED, missing);
    await expectCode(
      readAll(none.getLogs({ dnPrefix: "root", follow: true })),
      status.UNAUTHENTICATED,
      missing,
    );
    await expectCode(
      condition(none, api.Condition.STORAGE_MOUNTED),
      status.UNAUTHENTICATED,
      missing,
    );
    const foreign = client("foreign");
    await expectCode(supervisionTree(foreign), status.UNAUTHENTICATED, /not trusted/);
    await expectCode(logs(foreign, { dnPrefix: "root" }), status.UNAUTHENTICATED, /not trusted/);
    expect(following).toBe(0);
  });

  it("refuses a deleted node's revoked certificate as UNAUTHENTICATED", async () => {
    const revoked = client("revoked");
    await expectCode(supervisionTree(revoked), status.UNAUTHENTICATED, /revoked/);
    await expectCode(
      readAll(revoked.getLogs({ dnPrefix: "root", follow: true })),
      status.UNAUTHENTICATED,
      /revoked/,
    );
    await expectCode(
      condition(revoked, api.Condition.STORAGE_MOUNTED),
      status.UNAUTHENTICATED,
      /revoked/,
    );
    expect(following).toBe(0);
    expect(conditionCalls).toEqual([]);
  });

  it("is served on the node's debug port", () => {
    expect(defaultDebugPort).toBe(7837);
  });
});
