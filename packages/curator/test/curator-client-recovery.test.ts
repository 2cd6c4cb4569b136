/**
 * CuratorConnection recovering from a leader's faults, against hand-made
 * curators (real grpc-js servers with genuine node certificates of one
 * cluster CA on loopback): a connection kept through a fault that is READY
 * with nothing behind it, a leader being fenced that answers "not the
 * leader" while the others still name it, and callers sharing one search
 * with deadlines of their own. The assertions count calls and connections
 * and compare orders; the only times compared are lower bounds the client
 * itself must keep (a backoff), which a slow machine cannot break.
 */
import {
  Server,
  status,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServerWritableStream,
} from "@grpc/grpc-js";
import { connect, createServer, type Socket } from "node:net";
import { eventually } from "@metropolis/supervisor/testing";
import {
  CertificateAuthority,
  generateKeyPair,
  nodeIdFromPublicKey,
  tlsMaterial,
} from "@metropolis/pki";
import { api, curator } from "@metropolis/proto";
import {
  CuratorConnection,
  CuratorConnectionClosedError,
  type CuratorConnectionOptions,
  LeaderSearchTimeoutError,
  type LeaderClients,
  NoLeaderError,
} from "../src/curator-client";
import { curatorServerCredentials } from "../src/credentials";
import type { CuratorEndpoint } from "../src/leadership";
import { notTheLeader } from "../src/not-the-leader";

/** A node of the test CA: its ID and TLS material. */
async function node(ca: CertificateAuthority) {
  const keys = generateKeyPair();
  const certificate = await ca.issueNodeCertificate(keys.publicKey, { ipAddresses: ["127.0.0.1"] });
  return {
    nodeId: nodeIdFromPublicKey(keys.publicKey),
    tls: tlsMaterial({ certificate, privateKey: keys.privateKey, ca: ca.certificate }),
  };
}

type Node = Awaited<ReturnType<typeof node>>;

/** How a fake curator answers a leader's call (Management.GetClusterInfo). */
type LeaderCallAnswer =
  | { kind: "lead" }
  /** UNAVAILABLE "not the leader", naming `leader` in its trailing metadata when given. */
  | { kind: "refuse"; leader?: CuratorEndpoint };

/**
 * A curator served with `self`'s certificate on 127.0.0.1. Its CuratorLocal
 * names the leader `names()` (settable) returns when asked, and again whatever
 * `announce()` is given on every question still open (as a curator does once
 * a new leader is elected); its Management.GetClusterInfo answers as
 * `answer` says, recording when each call arrived (monotonic ms).
 */
async function fakeCurator(self: Node, initiallyNames: () => CuratorEndpoint) {
  const server = new Server();
  const questions = new Set<
    ServerWritableStream<curator.GetCurrentLeaderRequest, curator.GetCurrentLeaderResponse>
  >();
  const counts = { questions: 0 };
  const leaderCalls: number[] = [];
  const state: { answer: LeaderCallAnswer } = { answer: { kind: "lead" } };
  const fake = {
    /** Who it names when asked. */
    names: initiallyNames,
  };
  const response = (leader: CuratorEndpoint): curator.GetCurrentLeaderResponse => ({
    leaderNodeId: leader.nodeId,
    leaderHost: leader.host,
    leaderPort: leader.port,
    thisNodeId: self.nodeId,
  });
  server.addService(curator.CuratorLocalService, {
    getCurrentLeader: (
      call: ServerWritableStream<curator.GetCurrentLeaderRequest, curator.GetCurrentLeaderResponse>,
    ) => {
      counts.questions++;
      questions.add(call);
      call.on("cancelled", () => questions.delete(call));
      call.write(response(fake.names()));
    },
    getCaCertificate: (_call, callback) => callback(null, { caCertificate: Buffer.alloc(0) }),
  } satisfies curator.CuratorLocalServer);
  server.addService(api.ManagementService, {
    getClusterInfo: (
      _call: ServerUnaryCall<api.GetClusterInfoRequest, api.GetClusterInfoResponse>,
      callback: sendUnaryData<api.GetClusterInfoResponse>,
    ) => {
      leaderCalls.push(performance.now());
      const answer = state.answer;
      if (answer.kind === "lead") {
        callback(null, api.GetClusterInfoResponse.fromPartial({}));
        return;
      }
      const refusal = notTheLeader(
        "/metropolis.proto.api.Management/GetClusterInfo",
        "this curator is stepping down",
        answer.leader,
      );
      callback({ code: refusal.code, details: refusal.details, metadata: refusal.metadata });
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", curatorServerCredentials(self.tls), (e, p) =>
      e ? reject(e) : resolve(p),
    ),
  );
  return Object.assign(fake, {
    port,
    endpoint: (at = port): CuratorEndpoint => ({
      nodeId: self.nodeId,
      host: "127.0.0.1",
      port: at,
    }),
    counts,
    leaderCalls,
    state,
    announce: (leader: CuratorEndpoint) => {
      for (const call of questions) call.write(response(leader));
    },
    stop: () => server.forceShutdown(),
  });
}

/**
 * A TCP proxy on 127.0.0.1 to `port` that counts the connections made
 * through it, and can cut the ones made so far as a host cut off whose
 * curator restarted meanwhile leaves them: `blackhole()` closes their
 * server side and drops whatever the client sends, leaving the client's
 * socket open with no FIN or RST (the kernel of a host cut off by iptables
 * sends none that arrive). New connections are forwarded as before.
 */
async function blackholeProxy(port: number) {
  const pairs = new Set<{ inbound: Socket; outbound: Socket }>();
  /** `firstClosed`: the first connection made through it was closed (by either side). */
  const counts = { connections: 0, open: 0, firstClosed: false };
  const server = createServer((inbound) => {
    counts.connections++;
    counts.open++;
    const outbound = connect(port, "127.0.0.1");
    const pair = { inbound, outbound };
    const first = counts.connections === 1;
    pairs.add(pair);
    for (const s of [inbound, outbound]) s.on("error", () => undefined);
    inbound.on("close", () => {
      counts.open--;
      if (first) counts.firstClosed = true;
      pairs.delete(pair);
      outbound.destroy();
    });
    outbound.on("close", () => inbound.destroy());
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("proxy has no port");
  return {
    port: address.port,
    counts,
    blackhole: () => {
      for (const { inbound, outbound } of pairs) {
        inbound.unpipe();
        outbound.unpipe();
        outbound.removeAllListeners("close");
        outbound.destroy();
        inbound.on("data", () => undefined);
      }
    },
    stop: () => {
      for (const { inbound, outbound } of pairs) {
        inbound.destroy();
        outbound.destroy();
      }
      server.close();
    },
  };
}

/** `client`'s CuratorConnection to `curators`. */
function connectionAs(
  client: Node,
  ca: CertificateAuthority,
  curators: readonly CuratorEndpoint[],
  options: Pick<CuratorConnectionOptions, "giveUpOnDeadline" | "standby"> = {},
): CuratorConnection {
  return new CuratorConnection({
    endpoints: curators,
    ca: ca.certificate.toPem(),
    identity: client.tls,
    ...options,
  });
}

/**
 * The leader's answer to GetClusterInfo (its node ID), or CANCELLED after
 * 2 s: over a connection with nothing behind it no answer ever comes.
 */
const clusterInfo = (leader: LeaderClients) =>
  new Promise<string>((resolve, reject) => {
    const call = leader.management.getClusterInfo({}, (e) => {
      clearTimeout(timer);
      if (e) reject(e);
      else resolve(leader.endpoint.nodeId);
    });
    const timer = setTimeout(() => call.cancel(), 2_000);
  });

/**
 * A leader reached through a proxy that can blackhole its connections, a
 * follower naming it (directly, no proxy), and a node's client that knows
 * both as curators, with standby connections (as roleserve's
 * `nodeCuratorConnection`: the leader's connection is also the one kept to
 * it as a curator), and found the leader through the follower.
 */
async function leaderBehindProxy() {
  const ca = await CertificateAuthority.create();
  const [leaderNode, followerNode, client] = await Promise.all([1, 2, 3].map(() => node(ca)));
  let proxyPort = 0;
  const leader = await fakeCurator(leaderNode, () => leader.endpoint(proxyPort));
  const proxy = await blackholeProxy(leader.port);
  proxyPort = proxy.port;
  const follower = await fakeCurator(followerNode, () => leader.endpoint(proxyPort));
  // The follower is asked first (the leader would be, in turn, as a curator).
  jest.spyOn(Math, "random").mockReturnValue(0);
  const connection = connectionAs(client, ca, [follower.endpoint(), leader.endpoint(proxyPort)], {
    standby: { spreadMs: 0 },
  });
  let given: LeaderClients | undefined;
  expect(
    await connection.call(async (clients) => {
      given = clients;
      return clusterInfo(clients);
    }),
  ).toBe(leaderNode.nodeId);
  if (given === undefined) throw new Error("no leader given");
  jest.restoreAllMocks();
  expect(proxy.counts.connections).toBe(1);
  return {
    ca,
    connection,
    given,
    leaderNode,
    leader,
    follower,
    proxy,
    close: () => {
      connection.close();
      proxy.stop();
      leader.stop();
      follower.stop();
    },
  };
}

describe("CuratorConnection after a fault left its connection to the leader READY with nothing behind it", () => {
  it("reaches a leader it gave up as unresponsive over a new connection when the curators name it again", async () => {
    const cluster = await leaderBehindProxy();
    try {
      // The leader's host was cut off and its curator restarted; the network healed.
      cluster.proxy.blackhole();
      // The heartbeat noticed (its answer did not come): the leader is given up.
      cluster.connection.leaderUnresponsive(cluster.given, new Error("no heartbeat answer"));
      // The curators still (again) name it: the proof that it answers must
      // come over a new connection, and so must the calls. Over the old one
      // neither ever comes.
      const reached = await cluster.connection.call(clusterInfo, { timeoutMs: 8_000 });
      expect(reached).toBe(cluster.leaderNode.nodeId);
      expect(cluster.proxy.counts.connections).toBeGreaterThanOrEqual(2);
    } finally {
      cluster.close();
    }
  });

  it("reaches a leader whose stream broke (unreachable) over a new connection, not the old one that still looks READY", async () => {
    const cluster = await leaderBehindProxy();
    try {
      cluster.proxy.blackhole();
      cluster.connection.leaderFailed(
        cluster.given,
        Object.assign(new Error("stream broke"), { code: status.UNAVAILABLE }),
      );
      const reached = await cluster.connection.call(clusterInfo, { timeoutMs: 8_000 });
      expect(reached).toBe(cluster.leaderNode.nodeId);
      expect(cluster.proxy.counts.connections).toBeGreaterThanOrEqual(2);
    } finally {
      cluster.close();
    }
  });

  it("lets the curators it knows change while it waits for a failed leader to be reachable", async () => {
    const cluster = await leaderBehindProxy();
    // The leader's host hangs: its port accepts connections, whose TLS never ends.
    const held: Socket[] = [];
    const frozen = createServer((socket) => held.push(socket));
    try {
      cluster.proxy.stop();
      await new Promise<void>((resolve) => frozen.listen(cluster.proxy.port, "127.0.0.1", resolve));
      cluster.connection.leaderFailed(
        cluster.given,
        Object.assign(new Error("stream broke"), { code: status.UNAVAILABLE }),
      );
      const search = cluster.connection.leader(5_000).then(
        () => "found",
        (e: unknown) => e,
      );
      // The search is watching its new connection to the leader.
      await eventually(() => held.length > 0, "the search connecting to the failed leader");
      // The directory drops the leader from the curators: its connection,
      // the one the search watches, is closed under the watch.
      expect(() => cluster.connection.setEndpoints([cluster.follower.endpoint()])).not.toThrow();
      expect(await search).toBeInstanceOf(NoLeaderError);
    } finally {
      cluster.close();
      for (const socket of held) socket.destroy();
      frozen.close();
    }
  });

  it("closes its connection to a leader that refused once another leads: a later return connects anew", async () => {
    const cluster = await leaderBehindProxy();
    const next = await fakeCurator(await node(cluster.ca), () => next.endpoint());
    try {
      await eventually(() => cluster.leader.counts.questions === 1, "the standby connection made");
      // The leader steps down naming no one; the follower still names it, for now.
      cluster.leader.state.answer = { kind: "refuse" };
      const call = cluster.connection.call(clusterInfo, { timeoutMs: 20_000 });
      await eventually(() => cluster.leader.leaderCalls.length >= 2, "the leader refused twice");
      // Its connection, proven alive by its answers, is kept while it may be taken back.
      expect(cluster.proxy.counts.connections).toBe(1);
      // Another leads: the follower says so.
      cluster.follower.names = () => next.endpoint();
      cluster.follower.announce(next.endpoint());
      expect(await call).toBe(next.endpoint().nodeId);
      // The old leader's connection is closed, and the standby connection to
      // it made anew: what a later return to it will use.
      await eventually(
        () => cluster.proxy.counts.firstClosed && cluster.proxy.counts.connections >= 2,
        "the old leader's connection closed, and a new one made",
      );
    } finally {
      next.stop();
      cluster.close();
    }
  });
});

/**
 * A leader being fenced (its lease deadline passed: it answers "not the
 * leader", naming no one or its successor) while a follower still names it,
 * and a client that found it through the follower; the leader is reached
 * through a proxy that counts the client's connections to it.
 */
async function fencedLeader() {
  const ca = await CertificateAuthority.create();
  const [leaderNode, followerNode, nextNode, client] = await Promise.all(
    [1, 2, 3, 4].map(() => node(ca)),
  );
  let proxyPort = 0;
  const leader = await fakeCurator(leaderNode, () => leader.endpoint(proxyPort));
  const proxy = await blackholeProxy(leader.port);
  proxyPort = proxy.port;
  const next = await fakeCurator(nextNode, () => next.endpoint());
  const follower = await fakeCurator(followerNode, () => leader.endpoint(proxyPort));
  // An operator's client (metroctl): it knows the follower only, no standby connections.
  const connection = connectionAs(client, ca, [follower.endpoint()]);
  expect(await connection.call(clusterInfo)).toBe(leaderNode.nodeId);
  expect(follower.counts.questions).toBe(1);
  return {
    connection,
    leader,
    next,
    follower,
    proxy,
    close: () => {
      connection.close();
      proxy.stop();
      for (const c of [leader, next, follower]) c.stop();
    },
  };
}

describe('CuratorConnection and a leader that answers "not the leader" while the curators still name it', () => {
  it("backs it off: each call there waits at least 100 ms, then twice as long as the last, over the one connection", async () => {
    const cluster = await fencedLeader();
    try {
      cluster.leader.state.answer = { kind: "refuse" };
      const calls = cluster.leader.leaderCalls;
      const first = calls.length;
      // The follower names it throughout: the calls run out of time there.
      // Three at once, as a node's workers make them.
      const errors = await Promise.all(
        [1, 2, 3].map(() =>
          cluster.connection.call(clusterInfo, { timeoutMs: 4_000 }).then(
            () => undefined,
            (e: unknown) => e,
          ),
        ),
      );
      for (const error of errors) expect(String(error)).toContain("not the leader");
      // Taken back over the connection it answered on: without the backoff
      // and the kept connection, each return was two new TLS connections
      // (the search's proof that it is reachable, then its clients' own):
      // dozens in these 4 s.
      expect(cluster.proxy.counts.connections).toBe(1);
      // The calls that took it back together (a burst: the three callers
      // share each return) are apart by at least its backoff: 100, 200,
      // 400, 800, 1,600 ms… (lower bounds only: the client's own).
      const refused = calls.slice(first);
      const bursts: number[] = [];
      for (const at of refused) {
        const last = bursts[bursts.length - 1];
        if (last === undefined || at - last >= 50) bursts.push(at);
      }
      const gaps = bursts.slice(1).map((at, i) => at - bursts[i]);
      expect(gaps.length).toBeGreaterThanOrEqual(2);
      gaps.forEach((gap, i) => expect(gap).toBeGreaterThanOrEqual(Math.min(100 * 2 ** i, 2_000)));
      // 4 s hold at most 100+200+400+800+1,600 ms of backoff: at most 6 returns of 3 calls.
      expect(refused.length).toBeLessThanOrEqual(18);
    } finally {
      cluster.close();
    }
  });

  it('follows the leader its "not the leader" answer names, without asking the curators or calling it again', async () => {
    const cluster = await fencedLeader();
    try {
      cluster.leader.state.answer = { kind: "refuse", leader: cluster.next.endpoint() };
      const calls = cluster.leader.leaderCalls.length;
      // The follower still names the old leader: only the hint leads to the next.
      expect(await cluster.connection.call(clusterInfo, { timeoutMs: 4_000 })).toBe(
        cluster.next.endpoint().nodeId,
      );
      expect(cluster.leader.leaderCalls.length).toBe(calls + 1);
      expect(cluster.next.leaderCalls.length).toBe(1);
      expect(cluster.follower.counts.questions).toBe(1);
    } finally {
      cluster.close();
    }
  });

  it("takes it back once its backoff is over, and forgets the backoff once it answers as the leader", async () => {
    const cluster = await fencedLeader();
    try {
      cluster.leader.state.answer = { kind: "refuse" };
      const calls = cluster.leader.leaderCalls;
      const call = cluster.connection.call(clusterInfo, { timeoutMs: 20_000 });
      await eventually(() => calls.length >= 4, "refused three times");
      // It leads again (a blip): the next call there is answered.
      cluster.leader.state.answer = { kind: "lead" };
      expect(await call).toBe(cluster.leader.endpoint().nodeId);
      // Refused again later: the backoff starts over at its floor, not where it was.
      cluster.leader.state.answer = { kind: "refuse" };
      const from = calls.length;
      const again = cluster.connection.call(clusterInfo, { timeoutMs: 20_000 });
      await eventually(() => calls.length >= from + 2, "refused, then called once more");
      cluster.leader.state.answer = { kind: "lead" };
      await again;
      // Its second call there came after the floor (100 ms), and well before
      // the 800 ms the backoff had reached (a generous upper bound: the
      // floor's stretch is at most 150 ms, the call's own retry at most 75 ms).
      const gap = calls[from + 1] - calls[from];
      expect(gap).toBeGreaterThanOrEqual(100);
      expect(gap).toBeLessThan(800);
    } finally {
      cluster.close();
    }
  });
});

describe("CuratorConnection's callers sharing one search, each with its own deadline", () => {
  it("tells a caller with less time that no leader was found within its time, while the search goes on for the other", async () => {
    const ca = await CertificateAuthority.create();
    const [mute, client] = [await node(ca), await node(ca)];
    // A curator that takes every question and never answers.
    const server = new Server();
    const questions = { count: 0 };
    server.addService(curator.CuratorLocalService, {
      getCurrentLeader: () => {
        questions.count++;
      },
      getCaCertificate: (_call, callback) => callback(null, { caCertificate: Buffer.alloc(0) }),
    } satisfies curator.CuratorLocalServer);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", curatorServerCredentials(mute.tls), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
    const connection = connectionAs(client, ca, [{ nodeId: mute.nodeId, host: "127.0.0.1", port }]);
    const settled: string[] = [];
    try {
      const long = connection.leader(600_000).finally(() => settled.push("long"));
      long.catch(() => undefined);
      const short = connection.leader(300).finally(() => settled.push("short"));
      const shortError = await short.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(shortError).toBeInstanceOf(LeaderSearchTimeoutError);
      expect(shortError).toBeInstanceOf(NoLeaderError);
      expect(settled).toEqual(["short"]);
      // One search, one question, shared: the short caller asked nothing of its own.
      expect(questions.count).toBe(1);
      // A call with less time than the search under way: the same.
      await expect(
        connection.call(async () => "unreachable", { timeoutMs: 200 }),
      ).rejects.toBeInstanceOf(LeaderSearchTimeoutError);
      expect(settled).toEqual(["short"]);
      connection.close();
      await expect(long).rejects.toBeInstanceOf(CuratorConnectionClosedError);
    } finally {
      connection.close();
      server.forceShutdown();
    }
  });

  it("gives the leader found within its time to a caller with less time that shares the search", async () => {
    const ca = await CertificateAuthority.create();
    const [member, client] = [await node(ca), await node(ca)];
    // Answers each question 300 ms after it came.
    const server = new Server();
    const questions = { count: 0 };
    server.addService(curator.CuratorLocalService, {
      getCurrentLeader: (
        call: ServerWritableStream<
          curator.GetCurrentLeaderRequest,
          curator.GetCurrentLeaderResponse
        >,
      ) => {
        questions.count++;
        const timer = setTimeout(
          () =>
            call.write({
              leaderNodeId: member.nodeId,
              leaderHost: "127.0.0.1",
              leaderPort: port,
              thisNodeId: member.nodeId,
            }),
          300,
        );
        call.on("cancelled", () => clearTimeout(timer));
      },
      getCaCertificate: (_call, callback) => callback(null, { caCertificate: Buffer.alloc(0) }),
    } satisfies curator.CuratorLocalServer);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", curatorServerCredentials(member.tls), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
    const connection = connectionAs(client, ca, [
      { nodeId: member.nodeId, host: "127.0.0.1", port },
    ]);
    try {
      const [long, short] = await Promise.all([
        connection.leader(600_000),
        connection.leader(20_000),
      ]);
      expect([long.nodeId, short.nodeId]).toEqual([member.nodeId, member.nodeId]);
      expect(questions.count).toBe(1);
    } finally {
      connection.close();
      server.forceShutdown();
    }
  });
});
