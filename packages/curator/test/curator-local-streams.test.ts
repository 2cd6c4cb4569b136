/**
 * CuratorLocal.GetCurrentLeader streams: anyone may open them (no client
 * certificate needed), so they are capped per connection and in total, and a
 * cancelled one releases everything it held.
 *
 * Real gRPC over loopback with the curator's real mTLS and server limits;
 * no etcd (the leader is a MemoryValue, as the Curator's own is).
 */
import { getEventListeners } from "node:events";
import { runInThisContext } from "node:vm";
import { Server, status, type ClientReadableStream, type ServiceError } from "@grpc/grpc-js";
import { MemoryValue } from "@metropolis/event";
import { liveHeapBytes } from "@metropolis/supervisor/testing";
import { CertificateAuthority, generateKeyPair, tlsMaterial } from "@metropolis/pki";
import { curator } from "@metropolis/proto";
import winston from "winston";
import { BoundedStreams, type StreamCaps } from "../src/bounded-streams";
import { curatorClientCredentials, curatorServerCredentials } from "../src/credentials";
import { curatorLocalServer } from "../src/curator-local";
import type { CuratorEndpoint } from "../src/leadership";
import {
  maxLeaderStreams,
  maxLeaderStreamsPerConnection,
  serverLimits,
} from "../src/server-limits";

const { CuratorLocalClient, CuratorLocalService } = curator;
type LocalClient = InstanceType<typeof CuratorLocalClient>;
type LeaderStream = ClientReadableStream<curator.GetCurrentLeaderResponse>;

/**
 * Node's own process object: Jest gives tests a copy, which does not see the
 * warnings Node emits (MaxListenersExceededWarning among them).
 */
const nodeProcess = runInThisContext("process") as NodeJS.Process;

const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MB`;

const leaderNodeId = "metropolis-00000000000000000000000000000000";

let caPem: string;
let tls: { cert: string; key: string; ca: string };
/** What each test's server and clients are; stopped after each test. */
let running: { server: Server; stop: AbortController; clients: LocalClient[] } | undefined;

beforeAll(async () => {
  const ca = await CertificateAuthority.create();
  caPem = ca.certificate.toPem();
  const { publicKey, privateKey } = generateKeyPair();
  const certificate = await ca.issueNodeCertificate(publicKey);
  tls = tlsMaterial({ certificate, privateKey, ca: ca.certificate });
});

afterEach(() => {
  running?.stop.abort();
  running?.clients.forEach((c) => c.close());
  running?.server.forceShutdown();
  running = undefined;
});

/** Serves CuratorLocal on a free port of 127.0.0.1, its GetCurrentLeader streams capped at `caps`. */
async function serve(caps: StreamCaps) {
  const stop = new AbortController();
  const streams = new BoundedStreams("GetCurrentLeader", caps, stop.signal);
  const server = new Server(serverLimits());
  running = { server, stop, clients: [] };
  server.addService(
    CuratorLocalService,
    curatorLocalServer({
      nodeId: leaderNodeId,
      leader: new MemoryValue<CuratorEndpoint | undefined>({
        nodeId: leaderNodeId,
        host: "127.0.0.1",
        port: 7835,
      }),
      caCertificate: caPem,
      logger: winston.createLogger({ silent: true }),
      signal: stop.signal,
      leaderStreams: streams,
    }),
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", curatorServerCredentials(tls), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  const address = `127.0.0.1:${port}`;
  const clients = running.clients;
  return {
    streams,
    stop,
    /** A client without a certificate, on a connection of its own (grpc-js otherwise shares one per target). */
    newClient(): LocalClient {
      const client = new CuratorLocalClient(address, curatorClientCredentials(caPem), {
        "grpc.use_local_subchannel_pool": 1,
      });
      clients.push(client);
      return client;
    },
  };
}

/** Opens a stream and resolves with it once its first answer arrived; rejects with its error. */
function openStream(client: LocalClient): Promise<LeaderStream> {
  const stream = client.getCurrentLeader({});
  return new Promise((resolve, reject) => {
    stream.once("data", () => resolve(stream));
    stream.once("error", reject);
  });
}

/** The error a stream that should be refused ends with. */
async function refusal(client: LocalClient): Promise<ServiceError> {
  return openStream(client).then(
    (stream) => {
      stream.cancel();
      throw new Error("the stream was accepted");
    },
    (e: ServiceError) => e,
  );
}

/** Cancels a stream and resolves once the client saw it end. */
function cancel(stream: LeaderStream): Promise<void> {
  return new Promise((resolve) => {
    stream.on("error", () => undefined);
    stream.once("close", () => resolve());
    stream.cancel();
  });
}

describe("GetCurrentLeader streams", () => {
  it("are capped per connection and in total, with RESOURCE_EXHAUSTED", async () => {
    const { streams, newClient } = await serve({ perConnection: 3, total: 5 });
    const [a, b] = [newClient(), newClient()];
    const onA = await Promise.all([openStream(a), openStream(a), openStream(a)]);
    const perConnection = await refusal(a);
    expect(status[perConnection.code]).toBe("RESOURCE_EXHAUSTED");
    expect(perConnection.details).toMatch(
      /too many open GetCurrentLeader streams: this connection has 3/,
    );
    const onB = await Promise.all([openStream(b), openStream(b)]);
    const total = await refusal(b);
    expect(status[total.code]).toBe("RESOURCE_EXHAUSTED");
    expect(total.details).toMatch(/too many open GetCurrentLeader streams: this server has 5/);
    expect(streams.size).toBe(5);
    // Cancelled streams free their places, on their connections and in the total.
    await Promise.all([...onA, ...onB].map(cancel));
    await streams.drained();
    const reopened = await Promise.all([...[a, a, a].map(openStream), ...[b, b].map(openStream)]);
    expect(streams.size).toBe(5);
    await Promise.all(reopened.map(cancel));
    await streams.drained();
  });

  it("end when the server stops, and none opens after", async () => {
    const { streams, stop, newClient } = await serve({ perConnection: 16, total: 1024 });
    // More than ten: Node warns of a leak past ten listeners on one signal.
    const clients = [newClient(), newClient()];
    const open = await Promise.all(
      Array.from({ length: 20 }, (_, i) => openStream(clients[i % clients.length])),
    );
    // One listener on the server's signal for all of them, not one each.
    expect(getEventListeners(stop.signal, "abort").length).toBeLessThanOrEqual(1);
    const ends = open.map(
      (stream) =>
        new Promise<status>((resolve) =>
          stream.on("status", (s: { code: status }) => resolve(s.code)),
        ),
    );
    stop.abort();
    expect((await Promise.all(ends)).map((code) => status[code])).toEqual(open.map(() => "OK"));
    await streams.drained();
    const late = await refusal(clients[0]);
    expect(status[late.code]).toBe("UNAVAILABLE");
    expect(late.details).toMatch(/stopping/);
  });

  it("release everything when cancelled: 20,000 opened and cancelled, no listener warning, heap back near its baseline", async () => {
    const { streams, stop, newClient } = await serve({
      perConnection: maxLeaderStreamsPerConnection,
      total: maxLeaderStreams,
    });
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    nodeProcess.on("warning", onWarning);
    try {
      // As many connections as it takes to hold the total cap, each at its own cap.
      const pool = Array.from(
        { length: Math.ceil(maxLeaderStreams / maxLeaderStreamsPerConnection) },
        newClient,
      );
      let listenersAtPeak = 0;
      /** Opens the most streams the caps allow, sees one more refused, and cancels them all. */
      const round = async () => {
        const open = await Promise.all(
          Array.from({ length: maxLeaderStreams }, (_, i) => openStream(pool[i % pool.length])),
        );
        listenersAtPeak = Math.max(listenersAtPeak, getEventListeners(stop.signal, "abort").length);
        expect(status[(await refusal(newClient())).code]).toBe("RESOURCE_EXHAUSTED");
        await Promise.all(open.map(cancel));
        // Every stream is gone from the server before the next round (or the measurement).
        await streams.drained();
        return open.length;
      };
      // A first round warms up grpc-js, the connections and the JIT, which stay.
      await round();
      const baseline = liveHeapBytes();
      const rssBefore = process.memoryUsage().rss;
      let opened = 0;
      let peakRss = rssBefore;
      while (opened < 20_000) {
        opened += await round();
        peakRss = Math.max(peakRss, process.memoryUsage().rss);
      }
      const after = liveHeapBytes();
      console.log(
        `${opened} GetCurrentLeader streams in rounds of ${maxLeaderStreams}: heap after GC ${mb(baseline)} -> ${mb(after)}; ` +
          `rss ${mb(rssBefore)} -> peak ${mb(peakRss)} -> ${mb(process.memoryUsage().rss)}`,
      );
      expect(listenersAtPeak).toBeLessThanOrEqual(1);
      expect(warnings.filter((w) => w.name === "MaxListenersExceededWarning")).toEqual([]);
      // A stream holds about 7 KiB while open; a leak of even 800 bytes each
      // would be 16 MB here, far above the noise of a collected heap.
      expect(after - baseline).toBeLessThan(16 * 2 ** 20);
    } finally {
      nodeProcess.off("warning", onWarning);
    }
  }, 300_000);
});
