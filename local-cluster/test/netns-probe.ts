/**
 * Test helpers for the testbed and network tests: a probe — a small Node
 * process run on one testbed host through nsenter — that serves a TCP echo
 * port, dials other hosts, and keeps an established connection open to
 * send over later; and the owner's own dial from the test process (the
 * host namespace, behind the bridge address).
 *
 * A dial succeeds only when a line sent comes back echoed before its
 * deadline, so "reaches" means packets went both ways. Every probe is a
 * child process whose PID (nsenter execs node) the test stops in its
 * afterAll with `stop()`.
 */
import type { ChildProcess } from "node:child_process";
import { connect } from "node:net";
import { createInterface } from "node:readline";
import type { Testbed } from "../src/testbed";

/** The probe's program: JSON commands on stdin, one JSON answer per line on stdout. */
const probeScript = `
const net = require("node:net");
const conns = new Map();
let nextConn = 1;
const answer = (id, body) => process.stdout.write(JSON.stringify({ id, ...body }) + "\\n");
function echoOnce(socket, timeoutMs) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => done({ ok: false, error: "timeout" }), timeoutMs);
    const onData = (d) => { if (d.toString().includes("ping")) done({ ok: true }); };
    const onError = (e) => done({ ok: false, error: e.code || e.message });
    function done(r) {
      clearTimeout(timer);
      socket.off("data", onData);
      socket.off("error", onError);
      resolve(r);
    }
    socket.on("data", onData);
    socket.on("error", onError);
    socket.write("ping\\n");
  });
}
function dial(host, port, timeoutMs) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const timer = setTimeout(() => { socket.destroy(); resolve({ ok: false, error: "timeout" }); }, timeoutMs);
    socket.once("error", (e) => { clearTimeout(timer); socket.destroy(); resolve({ ok: false, error: e.code }); });
    socket.once("connect", () => {
      clearTimeout(timer);
      resolve({ ok: true, socket });
    });
  });
}
const handlers = {
  async listen({ port }) {
    const server = net.createServer((s) => { s.on("error", () => {}); s.pipe(s); });
    await new Promise((resolve, reject) => server.once("error", reject).listen(port, "0.0.0.0", resolve));
    return { ok: true };
  },
  async dial({ host, port, timeoutMs }) {
    const started = Date.now();
    const d = await dial(host, port, timeoutMs);
    if (!d.ok) return d;
    const r = await echoOnce(d.socket, Math.max(timeoutMs - (Date.now() - started), 1));
    d.socket.destroy();
    return r;
  },
  async open({ host, port, timeoutMs }) {
    const d = await dial(host, port, timeoutMs);
    if (!d.ok) return d;
    d.socket.on("error", () => {});
    const r = await echoOnce(d.socket, timeoutMs);
    if (!r.ok) { d.socket.destroy(); return r; }
    const conn = nextConn++;
    conns.set(conn, d.socket);
    return { ok: true, conn };
  },
  async send({ conn, timeoutMs }) {
    const socket = conns.get(conn);
    if (!socket || socket.destroyed) return { ok: false, error: "closed" };
    return echoOnce(socket, timeoutMs);
  },
};
require("node:readline").createInterface({ input: process.stdin }).on("line", async (line) => {
  const { id, op, ...args } = JSON.parse(line);
  try {
    answer(id, await handlers[op](args));
  } catch (e) {
    answer(id, { ok: false, error: e.message });
  }
});
process.stdin.on("end", () => process.exit(0));
answer(0, { ok: true, pid: process.pid });
`;

/** What a probe answered. */
export interface ProbeAnswer {
  ok: boolean;
  error?: string;
  conn?: number;
  pid?: number;
}

/** A probe on one testbed host; see the module comment. */
export class Probe {
  private nextId = 1;
  private readonly waiting = new Map<number, (answer: ProbeAnswer) => void>();
  private readonly exited: Promise<void>;

  private constructor(
    readonly host: number,
    private readonly child: ChildProcess,
    /** The probe's PID (nsenter execs node: the child's PID is node's). */
    readonly pid: number,
  ) {
    this.exited = new Promise((resolve) => child.once("exit", () => resolve()));
  }

  /** Starts a probe on host `host` and waits until it runs. */
  static async start(testbed: Testbed, host: number): Promise<Probe> {
    const child = testbed.spawn(host, process.execPath, ["-e", probeScript], {
      stdio: ["pipe", "pipe", "inherit"],
    });
    const { pid, stdout } = child;
    if (pid === undefined || stdout === null) throw new Error("the probe did not start");
    const lines = createInterface({ input: stdout });
    const ready = new Promise<ProbeAnswer>((resolve, reject) => {
      child.once("exit", (code) => reject(new Error(`the probe exited (${code})`)));
      lines.once("line", (line) => resolve(parseAnswer(line)));
    });
    const first = await ready;
    const probe = new Probe(host, child, pid);
    if (first.pid !== pid) throw new Error(`the probe says it is ${first.pid}, spawned ${pid}`);
    lines.on("line", (line) => {
      const answer = parseAnswer(line);
      const id = Number(JSON.parse(line).id);
      probe.waiting.get(id)?.(answer);
      probe.waiting.delete(id);
    });
    return probe;
  }

  /** Serves a TCP echo on `port` of every address of the host. */
  async listen(port: number): Promise<void> {
    const answer = await this.ask({ op: "listen", port });
    if (!answer.ok)
      throw new Error(`host${this.host} could not listen on ${port}: ${answer.error}`);
  }

  /** Whether a new connection to `address:port` echoes a line within `timeoutMs`. */
  async reaches(address: string, port: number, timeoutMs = 1000): Promise<boolean> {
    return (await this.ask({ op: "dial", host: address, port, timeoutMs })).ok;
  }

  /** Opens a connection to `address:port` (one echo checked) and keeps it; resolves with its id. */
  async open(address: string, port: number, timeoutMs = 2000): Promise<number> {
    const answer = await this.ask({ op: "open", host: address, port, timeoutMs });
    if (!answer.ok || answer.conn === undefined) {
      throw new Error(`host${this.host} could not connect to ${address}:${port}: ${answer.error}`);
    }
    return answer.conn;
  }

  /** Whether a line sent over kept connection `conn` comes back within `timeoutMs`. */
  async echoes(conn: number, timeoutMs = 1000): Promise<boolean> {
    return (await this.ask({ op: "send", conn, timeoutMs })).ok;
  }

  /** Stops the probe (SIGKILL to its PID) and waits until it exited. */
  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      try {
        process.kill(this.pid, "SIGKILL");
      } catch {
        // exited meanwhile
      }
      await this.exited;
    }
  }

  private ask(command: Record<string, unknown>): Promise<ProbeAnswer> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, resolve);
      this.child.stdin?.write(JSON.stringify({ id, ...command }) + "\n", (e) => e && reject(e));
    });
  }
}

function parseAnswer(line: string): ProbeAnswer {
  const parsed: unknown = JSON.parse(line);
  if (typeof parsed !== "object" || parsed === null) return { ok: false, error: line };
  const field = (name: string): unknown => Reflect.get(parsed, name);
  const error = field("error");
  const conn = field("conn");
  const pid = field("pid");
  return {
    ok: field("ok") === true,
    error: typeof error === "string" ? error : undefined,
    conn: typeof conn === "number" ? conn : undefined,
    pid: typeof pid === "number" ? pid : undefined,
  };
}

/** Whether the owner (this process, behind the bridge) reaches `address:port` within `timeoutMs`. */
export function ownerReaches(address: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: address, port });
    const done = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("ping\n"));
    socket.on("data", (d) => {
      if (d.toString().includes("ping")) done(true);
    });
  });
}
