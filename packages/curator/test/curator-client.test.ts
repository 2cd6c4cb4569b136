/**
 * CuratorConnection on its own, against hand-made CuratorLocal servers with
 * genuine node certificates of one cluster CA: it stops as soon as its caller
 * gives up, and it believes a curator only where it expects that curator's
 * node — the rogue of issue 11 (a node of the cluster without the consensus
 * role, serving "the leader is me") is refused, whatever it answers.
 */
import { Server, status, type ServerWritableStream } from "@grpc/grpc-js";
import { createServer, type Socket } from "node:net";
import { eventually, runLate } from "@metropolis/supervisor/testing";
import { freePort } from "@metropolis/consensus/testing";
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
  NoLeaderError,
  unaryCall,
  UnansweredLeaderQuestionError,
} from "../src/curator-client";
import { curatorServerCredentials } from "../src/credentials";
import { countingProxy } from "./counting-proxy";

describe("CuratorConnection", () => {
  it("ends a call with the abort reason while no curator answers", async () => {
    const ca = await CertificateAuthority.create();
    // A port nothing listens on: the connection can only keep looking.
    const port = await freePort("127.0.0.1");
    const connection = new CuratorConnection({
      endpoints: [{ host: "127.0.0.1", port }],
      ca: ca.certificate.toPem(),
    });
    const controller = new AbortController();
    const reason = new Error("caller gave up");
    const call = connection.call(async () => "unreachable", {
      timeoutMs: 600_000,
      signal: controller.signal,
    });
    controller.abort(reason);
    await expect(call).rejects.toBe(reason);
    connection.close();
  });
});

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

/**
 * `client`'s CuratorConnection (its own certificate) to the curators given
 * as their port on 127.0.0.1 and the node each is expected to be.
 */
function connectionAs(
  client: Node,
  ca: CertificateAuthority,
  curators: readonly (readonly [port: number, node: Node])[],
  options: Pick<CuratorConnectionOptions, "giveUpOnDeadline"> = {},
): CuratorConnection {
  return new CuratorConnection({
    endpoints: curators.map(([port, node]) => ({ host: "127.0.0.1", port, nodeId: node.nodeId })),
    ca: ca.certificate.toPem(),
    identity: client.tls,
    ...options,
  });
}

type LeaderAnswer = (port: number) => curator.GetCurrentLeaderResponse;

/** The answer of curator `self`: `leader` leads, serving on the port `port()` gives. */
const naming =
  (self: Node, leader: Node, port: () => number): LeaderAnswer =>
  () => ({
    leaderNodeId: leader.nodeId,
    leaderHost: "127.0.0.1",
    leaderPort: port(),
    thisNodeId: self.nodeId,
  });

/** The answer of a curator that leads itself, serving on `port`. */
const leadsItself =
  (self: Node): LeaderAnswer =>
  (port) => ({
    leaderNodeId: self.nodeId,
    leaderHost: "127.0.0.1",
    leaderPort: port,
    thisNodeId: self.nodeId,
  });

/**
 * A CuratorLocal served with `self`'s certificate that names `leader` as the
 * leader — at once, or `opts.delayMs` later (Infinity: never) — and, when
 * `opts.then` is given, `then.afterMs` later on the same stream
 * `then.leader`, as a curator does once a new leader is elected; counts its
 * calls and the calls its clients cancelled.
 */
async function fakeCurator(
  self: Node,
  leader: LeaderAnswer,
  opts: {
    delayMs?: number;
    then?: { afterMs: number; leader: LeaderAnswer };
    /** Called once an answer was written to the connection's socket. */
    written?: () => void;
  } = {},
) {
  const server = new Server();
  const calls = { count: 0, cancelled: 0 };
  let port = 0;
  const implementation: curator.CuratorLocalServer = {
    getCurrentLeader: (
      call: ServerWritableStream<curator.GetCurrentLeaderRequest, curator.GetCurrentLeaderResponse>,
    ) => {
      calls.count++;
      const timers: ReturnType<typeof setTimeout>[] = [];
      const write = (answer: LeaderAnswer) => call.write(answer(port), () => opts.written?.());
      const later = (ms: number, answer: LeaderAnswer) => {
        if (Number.isFinite(ms)) timers.push(setTimeout(() => write(answer), ms));
      };
      if (opts.delayMs === undefined) write(leader);
      else later(opts.delayMs, leader);
      if (opts.then) later(opts.then.afterMs, opts.then.leader);
      call.on("cancelled", () => {
        calls.cancelled++;
        timers.forEach(clearTimeout);
      });
    },
    getCaCertificate: (_call, callback) => callback(null, { caCertificate: Buffer.alloc(0) }),
  };
  server.addService(curator.CuratorLocalService, implementation);
  // One leader method, answered by whoever serves this fake: what a client's call reaches.
  server.addService(api.ManagementService, {
    getClusterInfo: (
      _call: unknown,
      callback: (e: null, res: api.GetClusterInfoResponse) => void,
    ) => callback(null, api.GetClusterInfoResponse.fromPartial({})),
  });
  port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", curatorServerCredentials(self.tls), (e, p) =>
      e ? reject(e) : resolve(p),
    ),
  );
  return { port, calls, stop: () => server.forceShutdown() };
}

describe("CuratorConnection trusts only the curators it expects", () => {
  let ca: CertificateAuthority;
  let member: Node;
  let rogue: Node;
  let client: Node;
  beforeAll(async () => {
    ca = await CertificateAuthority.create();
    [member, rogue, client] = [await node(ca), await node(ca), await node(ca)];
  });

  it("refuses a node of the cluster at an address where another node was expected", async () => {
    // The rogue serves "the leader is me" with its own, genuine node certificate.
    const impostor = await fakeCurator(rogue, leadsItself(rogue));
    const connection = connectionAs(client, ca, [[impostor.port, member]]);
    try {
      const error = await connection.leader(1_500).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(NoLeaderError);
      expect(String(error)).toContain(`expected node ${member.nodeId} here`);
      // TLS stopped it before any call reached the impostor.
      expect(impostor.calls.count).toBe(0);
    } finally {
      connection.close();
      impostor.stop();
    }
  });

  it("dials the leader a curator names only with that leader's certificate", async () => {
    // The rogue listens where a real member's curator says the leader is…
    const impostor = await fakeCurator(rogue, leadsItself(rogue));
    const leaderId = (await node(ca)).nodeId;
    const honest = await fakeCurator(member, () => ({
      leaderNodeId: leaderId,
      leaderHost: "127.0.0.1",
      leaderPort: impostor.port,
      thisNodeId: member.nodeId,
    }));
    const connection = connectionAs(client, ca, [[honest.port, member]]);
    try {
      // …so the member's answer is followed, but the leader's address answers with the rogue.
      expect((await connection.leader(5_000)).nodeId).toBe(leaderId);
      const error = await connection
        .call(
          (leader) =>
            unaryCall<curator.GetConsensusStatusRequest, curator.GetConsensusStatusResponse>(
              leader.curator.getConsensusStatus.bind(leader.curator),
              {},
            ),
          { timeoutMs: 1_000 },
        )
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(String(error)).toContain(`expected node ${leaderId} here`);
      expect(impostor.calls.count).toBe(0);
    } finally {
      connection.close();
      impostor.stop();
      honest.stop();
    }
  });

  it("refuses an answer from another node than the one it asked", async () => {
    // A member's certificate, but it claims to be someone else in its answer.
    const confused = await fakeCurator(member, (port) => ({
      leaderNodeId: member.nodeId,
      leaderHost: "127.0.0.1",
      leaderPort: port,
      thisNodeId: rogue.nodeId,
    }));
    const connection = connectionAs(client, ca, [[confused.port, member]]);
    try {
      await expect(connection.leader(1_000)).rejects.toThrow(
        `answered as another node than ${member.nodeId}`,
      );
    } finally {
      connection.close();
      confused.stop();
    }
  });
});

/**
 * A node's connection whose leader just failed (nothing listens on its
 * port: a SIGKILLed curator), asking a member that names the failed leader
 * first (its lease has not expired yet) and the newly elected one
 * `electedAfterMs` later on the same stream. `scenario` makes the calls
 * (one, by default) with `call`, which records the leaders it is tried on.
 * Returns those, and the member's GetCurrentLeader calls.
 */
async function failedThenElected(
  electedAfterMs: number,
  scenario: (call: () => Promise<string>, connection: CuratorConnection) => Promise<unknown> = (
    call,
  ) => call(),
) {
  const ca = await CertificateAuthority.create();
  const [member, client, failed, elected] = await Promise.all([1, 2, 3, 4].map(() => node(ca)));
  const deadPort = await freePort("127.0.0.1");
  const named = (who: Node, port: number) => (): curator.GetCurrentLeaderResponse => ({
    leaderNodeId: who.nodeId,
    leaderHost: "127.0.0.1",
    leaderPort: port,
    thisNodeId: member.nodeId,
  });
  const curatorOfMember = await fakeCurator(member, named(failed, deadPort), {
    then: { afterMs: electedAfterMs, leader: named(elected, 1) },
  });
  const connection = connectionAs(client, ca, [[curatorOfMember.port, member]]);
  const used: string[] = [];
  const call = () =>
    connection.call<string>(
      async ({ endpoint }) => {
        used.push(endpoint.nodeId === failed.nodeId ? "failed" : "elected");
        // Only the elected leader answers; the failed one is gone.
        if (endpoint.nodeId !== elected.nodeId)
          throw Object.assign(new Error("connection refused"), { code: status.UNAVAILABLE });
        return endpoint.nodeId;
      },
      { timeoutMs: 20_000 },
    );
  try {
    await scenario(async () => {
      const leader = await call();
      expect(leader).toBe(elected.nodeId);
      return leader;
    }, connection);
    return { used, calls: curatorOfMember.calls.count };
  } finally {
    connection.close();
    curatorOfMember.stop();
  }
}

/**
 * Two curators of one CA, a leader that names itself and a follower that
 * names that leader (and nothing else, ever), and a client node of the CA.
 */
async function leaderAndFollower(ca: CertificateAuthority) {
  const [leader, follower, client] = await Promise.all([1, 2, 3].map(() => node(ca)));
  const leading = await fakeCurator(leader, leadsItself(leader));
  const following = await fakeCurator(follower, () => ({
    ...leadsItself(leader)(leading.port),
    thisNodeId: follower.nodeId,
  }));
  return { leader, follower, client, leading, following };
}

describe("CuratorConnection after its leader failed", () => {
  it("waits on the curator's stream for a new leader instead of taking the failed one again", async () => {
    // The failed leader was tried once (the first answer named it and
    // nothing said otherwise yet); after it failed, the curator was asked
    // once more and its stale answer waited past, not dialled again.
    expect(await failedThenElected(300)).toEqual({ used: ["failed", "elected"], calls: 2 });
  });

  it("keeps waiting while the failed leader stays unreachable, however long the curator takes", async () => {
    // 2.5 s: past the one second a stale answer used to be waited past.
    expect(await failedThenElected(2500)).toEqual({ used: ["failed", "elected"], calls: 2 });
  });

  it("still waits past the failed leader when several callers failed there, one after the other", async () => {
    // Each caller's failure forgets the leader it was given; the second one
    // used to forget "the current leader" again and with it that the failed
    // one is gone, and the failed leader was dialled once more.
    expect(await failedThenElected(300, (call) => Promise.all([call(), call(), call()]))).toEqual({
      used: ["failed", "failed", "failed", "elected", "elected", "elected"],
      calls: 2,
    });
  });

  /** The leader the connection has now (the failed one, named first), broken under a stream with `code`. */
  const streamBroke =
    (code: status) => async (call: () => Promise<string>, connection: CuratorConnection) => {
      const given = await connection.call(async (leader) => leader);
      connection.leaderFailed(given, Object.assign(new Error("stream broke"), { code }));
      return call();
    };

  it("looks for the leader at once after a stream on it broke as unavailable, not calling it first", async () => {
    expect(await failedThenElected(300, streamBroke(status.UNAVAILABLE))).toEqual({
      used: ["elected"],
      calls: 2,
    });
  });

  it("control: a stream refused otherwise leaves the leader as it is", async () => {
    expect(await failedThenElected(300, streamBroke(status.PERMISSION_DENIED))).toEqual({
      used: ["failed", "elected"],
      calls: 2,
    });
  });

  it("asks the other curators before the one that just failed as leader", async () => {
    const ca = await CertificateAuthority.create();
    const { leader, follower, client, leading, following } = await leaderAndFollower(ca);
    // Every search would start at the leader, the first curator listed.
    jest.spyOn(Math, "random").mockReturnValue(0);
    const connection = connectionAs(client, ca, [
      [leading.port, leader],
      [following.port, follower],
    ]);
    try {
      const given = await connection.call(async (clients) => clients);
      expect(given.endpoint.nodeId).toBe(leader.nodeId);
      expect([leading.calls.count, following.calls.count]).toEqual([1, 0]);
      connection.leaderFailed(
        given,
        Object.assign(new Error("stream broke"), { code: status.UNAVAILABLE }),
      );
      // The follower is asked, names the failed leader, and — that leader
      // being reachable after all — the search ends there; the failed
      // leader itself is not asked again.
      expect((await connection.leader(5_000)).nodeId).toBe(leader.nodeId);
      expect([leading.calls.count, following.calls.count]).toEqual([1, 1]);
    } finally {
      jest.restoreAllMocks();
      connection.close();
      leading.stop();
      following.stop();
    }
  });

  it("goes back to the failed leader at once when it can be reached again (it was a blip)", async () => {
    const ca = await CertificateAuthority.create();
    // The leader is up and says so; the follower names it too, and never anything else.
    const { leader, follower, client, leading, following } = await leaderAndFollower(ca);
    const connection = connectionAs(client, ca, [
      [leading.port, leader],
      [following.port, follower],
    ]);
    let attempts = 0;
    try {
      // The first attempt fails as if the connection had been reset; the
      // leader is still there, so the second goes to it — without waiting
      // for a new leader that no curator will name (the call's 5 s would
      // run out).
      const reached = await connection.call(
        async ({ endpoint }) => {
          if (attempts++ === 0)
            throw Object.assign(new Error("connection reset"), { code: status.UNAVAILABLE });
          return endpoint.nodeId;
        },
        { timeoutMs: 5_000 },
      );
      expect(reached).toBe(leader.nodeId);
      expect(attempts).toBe(2);
    } finally {
      connection.close();
      leading.stop();
      following.stop();
    }
  });
});

/**
 * A leader whose questions are answered after `answerAfterMs` (Infinity:
 * never, as a hung process's), a follower that names it, and, `electedAfterMs`
 * into each question, names `elected` instead (Infinity: never), and a
 * client (with `options`) that knows only the follower and has found the
 * leader through it.
 */
async function unresponsiveLeader(
  answerAfterMs: number,
  electedAfterMs: number,
  options: Pick<CuratorConnectionOptions, "giveUpOnDeadline"> = {},
) {
  const ca = await CertificateAuthority.create();
  const [leader, follower, elected, client] = await Promise.all([1, 2, 3, 4].map(() => node(ca)));
  const leading = await fakeCurator(leader, leadsItself(leader), { delayMs: answerAfterMs });
  const electedServer = await fakeCurator(elected, leadsItself(elected));
  const following = await fakeCurator(
    follower,
    naming(follower, leader, () => leading.port),
    Number.isFinite(electedAfterMs)
      ? {
          then: {
            afterMs: electedAfterMs,
            leader: naming(follower, elected, () => electedServer.port),
          },
        }
      : {},
  );
  const connection = connectionAs(client, ca, [[following.port, follower]], options);
  const given = await connection.call(async (clients) => clients);
  expect(given.endpoint.nodeId).toBe(leader.nodeId);
  return {
    connection,
    given,
    leader,
    elected,
    leading,
    following,
    close: () => {
      connection.close();
      for (const server of [leading, electedServer, following]) server.stop();
    },
  };
}

describe("CuratorConnection after its leader stopped answering", () => {
  it("waits past a leader given up as unresponsive, its connection open, until a curator names another", async () => {
    const cluster = await unresponsiveLeader(Infinity, 500);
    try {
      const why = new Error("no heartbeat answer");
      cluster.connection.leaderUnresponsive(cluster.given, why);
      // Its users are told (their streams on it end: roleserve's openStream).
      expect(cluster.given.dropped.aborted).toBe(true);
      expect(cluster.given.dropped.reason).toBe(why);
      expect((await cluster.connection.leader(20_000)).nodeId).toBe(cluster.elected.nodeId);
      // It was asked, as the proof that it answers again, and never answered.
      expect(cluster.leading.calls.count).toBe(1);
    } finally {
      cluster.close();
    }
  });

  it("control: a leader given up as unreachable is taken back as soon as it can be connected to", async () => {
    // The same hung leader, whose port still completes TLS: for a failed
    // call, being reachable again is proof enough, and it is dialled again.
    const cluster = await unresponsiveLeader(Infinity, 500);
    try {
      const broke = Object.assign(new Error("stream broke"), { code: status.UNAVAILABLE });
      cluster.connection.leaderFailed(cluster.given, broke);
      expect(cluster.given.dropped.reason).toBe(broke);
      expect((await cluster.connection.leader(20_000)).nodeId).toBe(cluster.leader.nodeId);
    } finally {
      cluster.close();
    }
  });

  /** A call on the leader that it held open past its deadline, as a hung process does. */
  const ranOutOfTime = (connection: CuratorConnection) => {
    const unanswered = Object.assign(new Error("Deadline exceeded after 5.000s"), {
      code: status.DEADLINE_EXCEEDED,
    });
    const call = connection.call(async () => {
      throw unanswered;
    });
    return { call, unanswered };
  };

  it("gives a leader up as unresponsive when a call on it ran out of time (an operator's client)", async () => {
    const cluster = await unresponsiveLeader(Infinity, 500);
    try {
      const { call, unanswered } = ranOutOfTime(cluster.connection);
      // The call fails as it did (no retry: its time is up), and the leader is given up.
      await expect(call).rejects.toBe(unanswered);
      expect(cluster.given.dropped.reason).toBe(unanswered);
      expect((await cluster.connection.leader(20_000)).nodeId).toBe(cluster.elected.nodeId);
      // Asked, as the proof that it answers again, and never answered.
      expect(cluster.leading.calls.count).toBe(1);
    } finally {
      cluster.close();
    }
  });

  it("control: a node's connection (giveUpOnDeadline off) keeps its leader after a call ran out of time", async () => {
    const cluster = await unresponsiveLeader(Infinity, 500, { giveUpOnDeadline: false });
    try {
      const { call, unanswered } = ranOutOfTime(cluster.connection);
      await expect(call).rejects.toBe(unanswered);
      expect(cluster.given.dropped.aborted).toBe(false);
      expect((await cluster.connection.leader(20_000)).nodeId).toBe(cluster.leader.nodeId);
      // Not asked again: the follower answered only the first search.
      expect(cluster.following.calls.count).toBe(1);
    } finally {
      cluster.close();
    }
  });

  it("forgets a leader whose call failed as unavailable once the call's time was up, too", async () => {
    // A hung leader fails a call only after the call's deadline (its
    // connection times out): the next call must look for the leader again.
    const cluster = await unresponsiveLeader(Infinity, Infinity);
    try {
      const unavailable = Object.assign(new Error("connection timed out"), {
        code: status.UNAVAILABLE,
      });
      const failing = cluster.connection.call(
        async () => {
          throw unavailable;
        },
        { timeoutMs: 0 },
      );
      await expect(failing).rejects.toBe(unavailable);
      expect(cluster.following.calls.count).toBe(1);
      await cluster.connection.leader(20_000);
      expect(cluster.following.calls.count).toBe(2);
    } finally {
      cluster.close();
    }
  });

  it("does not take back a failed leader that a curator still names when the search's time runs out", async () => {
    // A frozen leader: its port accepts connections (the kernel does), but
    // no TLS handshake ever ends there.
    const ca = await CertificateAuthority.create();
    const [frozen, follower, client] = await Promise.all([1, 2, 3].map(() => node(ca)));
    const sockets: Socket[] = [];
    const listener = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
    const address = listener.address();
    const frozenPort = typeof address === "object" && address !== null ? address.port : 0;
    const following = await fakeCurator(
      follower,
      naming(follower, frozen, () => frozenPort),
    );
    const connection = connectionAs(client, ca, [[following.port, follower]]);
    try {
      const given = await connection.call(async (clients) => clients);
      connection.leaderFailed(
        given,
        Object.assign(new Error("reset"), { code: status.UNAVAILABLE }),
      );
      // It used to be given back at the deadline, as the curator's last word,
      // and a call without a deadline of its own then waited on its TLS for good.
      const search = connection.leader(1_500).then(
        () => "the frozen leader",
        (e: unknown) => e,
      );
      const error = await search;
      expect(error).toBeInstanceOf(NoLeaderError);
    } finally {
      connection.close();
      following.stop();
      for (const socket of sockets) socket.destroy();
      listener.close();
    }
  });

  it("goes back to a leader given up as unresponsive once it answers a question (it was only slow)", async () => {
    // No curator ever names another leader: only its answer ends the wait
    // (the search's deadline, a minute, is past the test's timeout).
    const cluster = await unresponsiveLeader(300, Infinity);
    try {
      cluster.connection.leaderUnresponsive(cluster.given, new Error("no heartbeat answer"));
      expect((await cluster.connection.leader(60_000)).nodeId).toBe(cluster.leader.nodeId);
      expect(cluster.leading.calls.count).toBe(1);
    } finally {
      cluster.close();
    }
  });
});

describe("CuratorConnection searches for the leader once for all its callers", () => {
  it("asks one curator once when five callers start at once, and they share the leader's clients", async () => {
    const ca = await CertificateAuthority.create();
    const [member, client] = [await node(ca), await node(ca)];
    const curatorServer = await fakeCurator(member, leadsItself(member));
    const connection = connectionAs(client, ca, [[curatorServer.port, member]]);
    try {
      // A node's workers (heartbeat, status push, role watch …) all start together.
      const clients = await Promise.all(
        Array.from({ length: 5 }, () => connection.call(async (leader) => leader)),
      );
      expect(curatorServer.calls.count).toBe(1);
      expect(new Set(clients).size).toBe(1);
    } finally {
      connection.close();
      curatorServer.stop();
    }
  });

  it("ends the search under way on close(), and a later call searches anew", async () => {
    const ca = await CertificateAuthority.create();
    const port = await freePort("127.0.0.1");
    const connection = new CuratorConnection({
      endpoints: [{ host: "127.0.0.1", port }],
      ca: ca.certificate.toPem(),
    });
    const searching = connection.leader(600_000);
    connection.close();
    await expect(searching).rejects.toBeInstanceOf(CuratorConnectionClosedError);
    const again = new AbortController();
    const later = connection.call(async () => "unreachable", { signal: again.signal });
    again.abort(new Error("given up"));
    await expect(later).rejects.toThrow("given up");
    connection.close();
  });
});

describe("CuratorConnection with standby connections", () => {
  it("connects to every curator soon after finding the leader, and reaches a new leader over that connection", async () => {
    const ca = await CertificateAuthority.create();
    const [a, b, c, client] = [await node(ca), await node(ca), await node(ca), await node(ca)];
    // a leads; b and c say so, until b takes over.
    let leader: Node = a;
    let leaderPort = 0;
    const current: LeaderAnswer = () => ({
      leaderNodeId: leader.nodeId,
      leaderHost: "127.0.0.1",
      leaderPort,
      thisNodeId: "",
    });
    const servers = await Promise.all(
      [a, b, c].map((self) =>
        fakeCurator(self, (port) => ({ ...current(port), thisNodeId: self.nodeId })),
      ),
    );
    const proxies = await Promise.all(servers.map((s) => countingProxy(s.port)));
    const [proxyA, proxyB, proxyC] = proxies;
    leaderPort = proxyA.port;
    const connection = new CuratorConnection({
      endpoints: [a, b, c].map((n, i) => ({
        host: "127.0.0.1",
        port: proxies[i].port,
        nodeId: n.nodeId,
      })),
      ca: ca.certificate.toPem(),
      identity: client.tls,
      standby: { spreadMs: 100 },
    });
    try {
      await connection.call(async (l) => expect(l.endpoint.nodeId).toBe(a.nodeId));
      await eventually(
        () => proxies.every((p) => p.counts.connections === 1),
        "one connection to every curator",
      );
      // a fails; b leads from now on.
      servers[0].stop();
      proxyA.stop();
      leader = b;
      leaderPort = proxyB.port;
      const found = await connection.call(async (l) => {
        await unaryCall(l.management.getClusterInfo.bind(l.management), {});
        return l.endpoint.nodeId;
      });
      expect(found).toBe(b.nodeId);
      // b was reached over the connection kept to it: no new TLS connection.
      expect(proxyB.counts.connections).toBe(1);
      expect(proxyC.counts.connections).toBe(1);

      // c restarts (its connections drop): the standby connection to it is
      // made again without any call needing it — each time (the first time
      // could also be the standby timer set when b was found) — and c is
      // asked who leads over it once (so that c knows the node before it
      // leads: identity.ts), and then left alone.
      const asked = { ...servers[2].calls };
      proxyC.drop();
      await eventually(() => proxyC.counts.connections === 2, "c connected again");
      await eventually(
        () => servers[2].calls.cancelled === asked.cancelled + 1,
        "c asked once, and the question withdrawn",
      );
      expect(servers[2].calls.count).toBe(asked.count + 1);
      proxyC.drop();
      await eventually(() => proxyC.counts.connections === 3, "c connected once more");
      await eventually(() => servers[2].calls.count === asked.count + 2, "c asked once more");
    } finally {
      connection.close();
      for (const s of servers) s.stop();
      for (const p of proxies) p.stop();
    }
  });
});

describe("CuratorConnection asking curators that are slow to answer", () => {
  afterEach(() => jest.restoreAllMocks());

  it("asks the next curator while one does not answer, and withdraws the question once answered", async () => {
    const ca = await CertificateAuthority.create();
    const [silent, member, client] = [await node(ca), await node(ca), await node(ca)];
    const mute = await fakeCurator(silent, leadsItself(silent), { delayMs: Infinity });
    const answering = await fakeCurator(member, leadsItself(member));
    // The silent curator is asked first.
    jest.spyOn(Math, "random").mockReturnValue(0);
    const connection = connectionAs(client, ca, [
      [mute.port, silent],
      [answering.port, member],
    ]);
    try {
      const started = Date.now();
      expect((await connection.leader(60_000)).nodeId).toBe(member.nodeId);
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(mute.calls.count).toBe(1);
      await eventually(() => mute.calls.cancelled === 1, "the silent curator's question withdrawn");
    } finally {
      connection.close();
      mute.stop();
      answering.stop();
    }
  });

  it("takes an answer it received while it ran late, over the search's deadline that passed meanwhile", async () => {
    const ca = await CertificateAuthority.create();
    const [member, client] = [await node(ca), await node(ca)];
    const searchMs = 1_000;
    // Once the answer is in this process's socket, the process runs late
    // until well past the search's deadline, as a node host does after a
    // failover: the deadline's timer and the answer are then both due.
    const slow = await fakeCurator(member, leadsItself(member), {
      delayMs: 200,
      written: () => runLate(searchMs + 500),
    });
    const connection = connectionAs(client, ca, [[slow.port, member]]);
    try {
      expect((await connection.leader(searchMs)).nodeId).toBe(member.nodeId);
      expect(slow.calls.count).toBe(1);
    } finally {
      connection.close();
      slow.stop();
    }
  });

  it("control: without an answer the search ends at its deadline, naming the curator that did not answer", async () => {
    const ca = await CertificateAuthority.create();
    const [member, client] = [await node(ca), await node(ca)];
    const mute = await fakeCurator(member, leadsItself(member), { delayMs: Infinity });
    const connection = connectionAs(client, ca, [[mute.port, member]]);
    try {
      const search = connection.leader(500);
      await expect(search).rejects.toBeInstanceOf(NoLeaderError);
      const cause = await search.catch((e: NoLeaderError) => e.cause);
      expect(cause).toBeInstanceOf(UnansweredLeaderQuestionError);
      expect(String(cause)).toContain(`127.0.0.1:${mute.port} did not say who leads within`);
      await eventually(() => mute.calls.cancelled === 1, "the unanswered question withdrawn");
    } finally {
      connection.close();
      mute.stop();
    }
  });

  it("does not ask the next curator for an answer it received while it ran late past the hedge's delay", async () => {
    const ca = await CertificateAuthority.create();
    const [first, second, client] = [await node(ca), await node(ca), await node(ca)];
    // The first curator answers at once; this process then runs late for
    // longer than a search waits (3 s) before it asks the next curator.
    const answering = await fakeCurator(first, leadsItself(first), {
      written: () => runLate(3_500),
    });
    const other = await fakeCurator(second, leadsItself(second));
    jest.spyOn(Math, "random").mockReturnValue(0);
    const asked = jest.spyOn(curator.CuratorLocalClient.prototype, "getCurrentLeader");
    const connection = connectionAs(client, ca, [
      [answering.port, first],
      [other.port, second],
    ]);
    try {
      expect((await connection.leader(20_000)).nodeId).toBe(first.nodeId);
      // Asked once: the answer received meanwhile was read before the hedge.
      expect(asked).toHaveBeenCalledTimes(1);
    } finally {
      connection.close();
      answering.stop();
      other.stop();
    }
  });

  it("waits for a curator that answers late rather than giving it up", async () => {
    const ca = await CertificateAuthority.create();
    const [member, client] = [await node(ca), await node(ca)];
    // Slower than a client used to wait for a first answer (5 s) before asking again.
    const slow = await fakeCurator(member, leadsItself(member), { delayMs: 6_000 });
    const connection = connectionAs(client, ca, [[slow.port, member]]);
    try {
      expect((await connection.leader(20_000)).nodeId).toBe(member.nodeId);
      // One question, answered: not asked again after a few seconds.
      expect(slow.calls.count).toBe(1);
    } finally {
      connection.close();
      slow.stop();
    }
  }, 20_000);
});
