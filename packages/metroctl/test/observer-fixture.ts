/**
 * Test kit of the observer: a backend whose streams the test feeds by hand
 * ({@link FakeBackend}), fake nodes, a built-page stand-in, and an event
 * stream reader over real HTTP (node's http, so that tests can send the
 * headers a browser would: Host, Origin, Sec-Fetch-Site).
 */
import { request, type IncomingMessage } from "node:http";
import { mkdtemp, mkdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { status } from "@grpc/grpc-js";
import type { ClusterUpdate } from "../src/observe/cluster-feed";
import type { ObserverBackend } from "../src/observe/observer-backend";
import type {
  ConsensusSnapshot,
  LabelsChange,
  LogsQuery,
  ObservedLogEntry,
  ObservedNode,
  ObservedReport,
  RolesChange,
  TreeSnapshot,
} from "../src/observe/observer-protocol";

/** Values pushed by the test, read by one consumer at a time until its signal aborts. */
export class Channel<T> {
  private readonly queue: T[] = [];
  private wake: (() => void) | undefined;

  push(value: T): void {
    this.queue.push(value);
    this.wake?.();
  }

  async *read(signal: AbortSignal): AsyncGenerator<T> {
    while (!signal.aborted) {
      const next = this.queue.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        signal.addEventListener("abort", () => resolve(), { once: true });
      });
      this.wake = undefined;
    }
  }
}

/** A call the fake backend received. */
export type BackendCall =
  | { kind: "approve"; id: string }
  | { kind: "roles"; id: string; change: RolesChange }
  | { kind: "labels"; id: string; change: LabelsChange };

/** A backend fed by the test: counts upstreams, records actions, refuses on request. */
export class FakeBackend implements ObserverBackend {
  readonly clusterChannel = new Channel<ClusterUpdate>();
  readonly consensusChannel = new Channel<ConsensusSnapshot>();
  readonly trees = new Channel<TreeSnapshot>();
  readonly reportsChannel = new Channel<ObservedReport[]>();
  readonly logsChannel = new Channel<ObservedLogEntry[]>();
  readonly calls: BackendCall[] = [];
  /** How many cluster upstreams were opened, and how many are open now. */
  clusterOpened = 0;
  clusterOpen = 0;
  logQueries: LogsQuery[] = [];
  /** What the next action throws, if anything (e.g. a gRPC refusal). */
  refuseWith: unknown;
  closed = false;

  async *cluster(signal: AbortSignal): AsyncGenerator<ClusterUpdate> {
    this.clusterOpened++;
    this.clusterOpen++;
    try {
      yield* this.clusterChannel.read(signal);
    } finally {
      this.clusterOpen--;
    }
  }

  consensus(signal: AbortSignal): AsyncIterable<ConsensusSnapshot> {
    return this.consensusChannel.read(signal);
  }

  tree(_id: string, signal: AbortSignal): AsyncIterable<TreeSnapshot> {
    return this.trees.read(signal);
  }

  reports(_id: string, signal: AbortSignal): AsyncIterable<ObservedReport[]> {
    return this.reportsChannel.read(signal);
  }

  logs(_id: string, query: LogsQuery, signal: AbortSignal): AsyncIterable<ObservedLogEntry[]> {
    this.logQueries.push(query);
    return this.logsChannel.read(signal);
  }

  private act(call: BackendCall, message: string): Promise<string> {
    this.calls.push(call);
    const refusal = this.refuseWith;
    this.refuseWith = undefined;
    return refusal === undefined ? Promise.resolve(message) : Promise.reject(refusal);
  }

  approve(id: string): Promise<string> {
    return this.act({ kind: "approve", id }, `node ${id} approved`);
  }

  setRoles(id: string, change: RolesChange): Promise<string> {
    return this.act({ kind: "roles", id, change }, `node ${id} roles changed`);
  }

  setLabels(id: string, change: LabelsChange): Promise<string> {
    return this.act({ kind: "labels", id, change }, `node ${id} labels updated`);
  }

  close(): void {
    this.closed = true;
  }
}

/** A gRPC refusal as grpc-js reports one. */
export function serviceError(code: status, details: string): Error {
  return Object.assign(new Error(`${code} ${status[code]}: ${details}`), {
    code,
    details,
    metadata: undefined,
  });
}

/** Node ID number `i`: metropolis- and 32 hex digits. */
export const fakeNodeId = (i: number): string => `metropolis-${i.toString(16).padStart(32, "0")}`;

/** A fake node as GetNodes would make it, UP and HEALTHY unless told otherwise. */
export function fakeNode(i: number, overrides: Partial<ObservedNode> = {}): ObservedNode {
  return {
    id: fakeNodeId(i),
    address: `10.0.${Math.floor(i / 250)}.${(i % 250) + 1}`,
    state: "UP",
    roles: i < 3 ? ["consensus"] : ["worker"],
    health: "HEALTHY",
    heartbeatAgeSeconds: 0.5,
    heartbeatAt: 1_700_000_000_000,
    labels: { rack: `r${i % 20}` },
    version: "0.1.0",
    protocolVersion: 1,
    bootId: `boot-${i}`,
    statusTime: "2024-05-01T12:00:00.000Z",
    consensus: { member: i < 3, voter: null },
    curator: { running: i < 3, port: i < 3 ? 7835 : null, leader: i === 0 },
    ...overrides,
  };
}

/** A directory with a stand-in of the built page (index.html and one script). */
export async function fakeUiDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "observer-ui-"));
  await mkdir(join(dir, "assets"));
  await writeFile(join(dir, "index.html"), "<!doctype html><title>observer</title>");
  await writeFile(join(dir, "assets", "index-test.js"), "console.log('observer')");
  return dir;
}

/** An answer read whole. */
export interface HttpAnswer {
  status: number;
  headers: IncomingMessage["headers"];
  body: string;
}

/** One HTTP request to 127.0.0.1:`port`, with exactly `headers` (Host included). */
export function httpRequest(
  port: number,
  opts: { method?: string; path: string; headers?: Record<string, string>; body?: string | Buffer },
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method: opts.method ?? "GET",
        path: opts.path,
        headers: { host: `127.0.0.1:${port}`, ...opts.headers },
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (body += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(opts.body);
  });
}

/** One server-sent event. */
export interface SseEvent {
  event: string;
  data: unknown;
}

/** An open event stream: the events so far, and a wait for the next matching one. */
export class EventReader {
  readonly events: SseEvent[] = [];
  private buffer = "";
  private waiters: Array<() => void> = [];

  private constructor(private readonly res: IncomingMessage) {
    res.setEncoding("utf8");
    res.on("data", (chunk: string) => this.receive(chunk));
  }

  /** Opens `path` as the page would (own Host, token in the query). */
  static open(port: number, path: string): Promise<EventReader> {
    return new Promise((resolve, reject) => {
      const req = request(
        { host: "127.0.0.1", port, path, headers: { host: `127.0.0.1:${port}` } },
        (res) => {
          if (res.statusCode !== 200) reject(new Error(`${path}: HTTP ${res.statusCode}`));
          else resolve(new EventReader(res));
        },
      );
      req.on("error", reject);
      req.end();
    });
  }

  private receive(chunk: string): void {
    this.buffer += chunk;
    let end: number;
    while ((end = this.buffer.indexOf("\n\n")) !== -1) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const lines = block.split("\n");
      const event = lines.find((l) => l.startsWith("event: "))?.slice(7);
      const data = lines.find((l) => l.startsWith("data: "))?.slice(6);
      if (event !== undefined && data !== undefined) {
        this.events.push({ event, data: JSON.parse(data) });
      }
    }
    for (const wake of this.waiters.splice(0)) wake();
  }

  /** Resolves to the `count`-th event named `name` (1-based), waiting for it if needed. */
  async nth(name: string, count = 1, timeoutMs = 5000): Promise<SseEvent> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.events.filter((e) => e.event === name);
      if (found.length >= count) return found[count - 1];
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `no event ${name} #${count} in ${timeoutMs} ms; got ${this.events.map((e) => e.event).join(", ")}`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.res.destroy();
  }
}
