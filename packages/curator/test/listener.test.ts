/**
 * The curator's listener keeps one listening socket across its servers: a
 * connection that arrives while the follower's server has shut down and the
 * leader's is not serving yet is not refused (grpc-js's own bindAsync closed
 * the port in between, the moment a cluster's nodes dial a new leader) but
 * served by the next server; close() closes the port.
 */
import { connect } from "node:net";
import {
  credentials,
  makeGenericClientConstructor,
  ServerCredentials,
  type ServiceDefinition,
  type ServiceError,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { freePort } from "@metropolis/consensus/testing";
import { createLogger } from "winston";
import { Listener } from "../src/listener";

const host = "127.0.41.1";
const identity = (b: Buffer) => b;
const whoService: ServiceDefinition = {
  who: {
    path: "/test.Who/Who",
    requestStream: false,
    responseStream: false,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
    originalName: "who",
  },
};
const WhoClient = makeGenericClientConstructor(whoService, "Who");
type WhoClient = InstanceType<typeof WhoClient>;

/** Asks `client` who answers. */
const ask = (client: WhoClient) =>
  new Promise<string>((resolve, reject) =>
    client.makeUnaryRequest(
      "/test.Who/Who",
      identity,
      identity,
      Buffer.alloc(0),
      { deadline: Date.now() + 10_000 },
      (e: ServiceError | null, b?: Buffer) => (e ? reject(e) : resolve(String(b))),
    ),
  );

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
    expect(await ask(client)).toBe("follower");
    follower.abort();
    await first;
    client.close(); // its connection went with the follower's server
    // Between the two servers: the port still accepts (bindAsync's server refused here).
    await tcpConnect(port);
    const between = new WhoClient(`${host}:${port}`, credentials.createInsecure());
    const answer = ask(between);
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
