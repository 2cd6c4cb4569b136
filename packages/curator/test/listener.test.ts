/**
 * The curator's listener keeps one listening socket and one grpc-js server
 * across roles: a connection made to a follower is still there when it leads
 * (its clients need no new TLS handshake), a call that arrives between two
 * roles is answered by the next one, a method the role serving does not serve
 * is UNIMPLEMENTED, and the streams of a role that ended are ended
 * UNAVAILABLE after a grace period; close() closes the port and every
 * connection, also one that never finished (or started) its TLS handshake.
 */
import { once } from "node:events";
import { connect } from "node:net";
import {
  credentials,
  ServerCredentials,
  status,
  type ServiceDefinition,
  type ServiceError,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { freePort } from "@metropolis/consensus/testing";
import { CertificateAuthority, generateKeyPair, tlsMaterial } from "@metropolis/pki";
import { eventually } from "@metropolis/supervisor/testing";
import { createLogger } from "winston";
import { endGraceMs } from "../src/call-router";
import { curatorServerCredentials } from "../src/credentials";
import { Listener } from "../src/listener";
import { countingProxy } from "./counting-proxy";
import { askWho, identity, TickClient, tickService, WhoClient, whoService } from "./raw-services";

const host = "127.0.41.1";
type WhoClient = InstanceType<typeof WhoClient>;

/** A service answering `name`. */
const answering = (name: string): [ServiceDefinition, UntypedServiceImplementation] => [
  whoService,
  { who: (_call: unknown, done: (e: null, b: Buffer) => void) => done(null, Buffer.from(name)) },
];

/** Resolves when a TCP connection to `port` is accepted, rejects when refused. */
const tcpConnect = (port: number) =>
  new Promise<void>((resolve, reject) => {
    const socket = connect({ host, port }, () => {
      socket.destroy();
      resolve();
    });
    socket.once("error", reject);
  });

it("holds connections between two servers for the next one, and closes the port on close()", async () => {
  const port = await freePort(host);
  const listener = new Listener(
    `${host}:${port}`,
    ServerCredentials.createInsecure(),
    createLogger({ silent: true }),
  );
  const follower = new AbortController();
  let first: Promise<void> | undefined;
  await new Promise<void>((serving) => {
    first = listener.serve([answering("follower")], follower.signal, "follower", serving);
  });
  const client = new WhoClient(`${host}:${port}`, credentials.createInsecure());
  try {
    expect(await askWho(client)).toBe("follower");
    follower.abort();
    await first;
    client.close(); // its connection went with the follower's server
    // Between the two servers: the port still accepts (bindAsync's server refused here).
    await tcpConnect(port);
    const between = new WhoClient(`${host}:${port}`, credentials.createInsecure());
    const answer = askWho(between);
    const leader = new AbortController();
    const second = listener.serve([answering("leader")], leader.signal, "leader");
    try {
      // Asked while no server served, answered by the leader's.
      expect(await answer).toBe("leader");
    } finally {
      between.close();
      leader.abort();
      await second;
    }
  } finally {
    client.close();
    follower.abort();
    await listener.close();
  }
  await expect(tcpConnect(port)).rejects.toMatchObject({ code: "ECONNREFUSED" });
});

it("closes a connection that never started its TLS handshake, rather than waiting for its client", async () => {
  const port = await freePort(host);
  const ca = await CertificateAuthority.create();
  const keys = generateKeyPair();
  const certificate = await ca.issueNodeCertificate(keys.publicKey, { ipAddresses: [host] });
  const listener = new Listener(
    `${host}:${port}`,
    curatorServerCredentials(
      tlsMaterial({ certificate, privateKey: keys.privateKey, ca: ca.certificate }),
    ),
    createLogger({ silent: true }),
  );
  const follower = new AbortController();
  let serving: Promise<void> | undefined;
  await new Promise<void>((resolve) => {
    serving = listener.serve([answering("follower")], follower.signal, "follower", resolve);
  });
  // A client that connects and sends nothing: TLS would wait 120 s for its hello.
  const idle = connect({ host, port });
  idle.on("error", () => undefined);
  const idleClosed = once(idle, "close");
  try {
    await eventually(() => listener.connectionCount === 1, "the idle connection to be accepted");
    follower.abort();
    await serving;
    // The port closes only once every connection has: so close() resolving means it was closed.
    await listener.close();
    await idleClosed;
    expect(listener.connectionCount).toBe(0);
  } finally {
    idle.destroy();
    follower.abort();
    await listener.close();
  }
});

/** A stream that sends one message and then stays open. */
const ticking: [ServiceDefinition, UntypedServiceImplementation] = [
  tickService,
  { tick: (call: { write: (b: Buffer) => void }) => call.write(Buffer.from("tick")) },
];

describe("one grpc-js server across roles", () => {
  let port: number;
  let listener: Listener;
  beforeEach(async () => {
    port = await freePort(host);
    listener = new Listener(
      `${host}:${port}`,
      ServerCredentials.createInsecure(),
      createLogger({ silent: true }),
    );
  });
  afterEach(() => listener.close());

  /** Serves `services` as `role` until the returned function ends it (resolving once ended). */
  async function serving(
    services: [ServiceDefinition, UntypedServiceImplementation][],
    role: string,
  ) {
    const stop = new AbortController();
    let ended: Promise<void> | undefined;
    await new Promise<void>((resolve) => {
      ended = listener.serve(services, stop.signal, role, resolve);
    });
    return async () => {
      stop.abort();
      await ended;
    };
  }

  it("keeps a client's connection when the role changes: the next role answers on it", async () => {
    const proxy = await countingProxy(port, host);
    const client = new WhoClient(`${host}:${proxy.port}`, credentials.createInsecure());
    try {
      const endFollower = await serving([answering("follower")], "follower");
      expect(await askWho(client)).toBe("follower");
      await endFollower();
      // Asked between the two roles: held, then answered by the leader.
      const between = askWho(client);
      const endLeader = await serving([answering("leader")], "leader");
      expect(await between).toBe("leader");
      expect(await askWho(client)).toBe("leader");
      expect(proxy.counts.connections).toBe(1);
      await endLeader();
    } finally {
      client.close();
      proxy.stop();
    }
  });

  it("answers UNIMPLEMENTED for a method the role serving does not serve", async () => {
    const endFollower = await serving([ticking], "follower");
    const client = new WhoClient(`${host}:${port}`, credentials.createInsecure());
    try {
      await expect(askWho(client)).rejects.toMatchObject({ code: status.UNIMPLEMENTED });
      await endFollower();
    } finally {
      client.close();
    }
  });

  it("ends the streams of a role that ended with UNAVAILABLE, after a grace period", async () => {
    const endLeader = await serving([ticking, answering("leader")], "leader");
    const client = new TickClient(`${host}:${port}`, credentials.createInsecure());
    try {
      const stream = client.makeServerStreamRequest(
        "/test.Tick/Tick",
        identity,
        identity,
        Buffer.alloc(0),
      );
      await new Promise((resolve) => stream.once("data", resolve));
      const ended = new Promise<ServiceError>((resolve) => stream.once("error", resolve));
      const started = Date.now();
      await endLeader();
      const error = await ended;
      expect(error.code).toBe(status.UNAVAILABLE);
      expect(Date.now() - started).toBeGreaterThanOrEqual(endGraceMs - 50);
    } finally {
      client.close();
    }
  });

  it("answers a unary call still running when its role ended UNAVAILABLE, after a grace period", async () => {
    let arrived: () => void = () => {};
    const called = new Promise<void>((resolve) => (arrived = resolve));
    // A handler that never answers, as one waiting on an etcd that does not answer.
    const silent: [ServiceDefinition, UntypedServiceImplementation] = [
      whoService,
      { who: () => arrived() },
    ];
    const endLeader = await serving([silent], "leader");
    const client = new WhoClient(`${host}:${port}`, credentials.createInsecure());
    try {
      const answer = askWho(client).then(
        () => ({ code: status.OK }),
        (e: ServiceError) => e,
      );
      await called;
      const started = Date.now();
      await endLeader();
      const error = await answer;
      expect(error.code).toBe(status.UNAVAILABLE);
      expect(Date.now() - started).toBeGreaterThanOrEqual(endGraceMs - 50);
    } finally {
      client.close();
    }
  });
});
