/**
 * One `metropolis-node` as a child process: the unit the local cluster and
 * the e2e tests are made of. It keeps the node's output lines (parsed from
 * the node's JSON log lines) in a ring buffer so that a caller can wait for
 * one instead of sleeping — above all for a typed progress event (the node
 * registered as some ID, its curator leads: see `@metropolis/supervisor`'s
 * node-progress.ts), never for the wording of a message — and
 * offers the two ways a machine goes down: `stop()`, a graceful shutdown
 * (SIGTERM to the node's PID, as init would get), and `kill()`, a power cut
 * (SIGKILL to the node and everything it started).
 *
 * Each node runs in its own process group (it is spawned detached), so that
 * a power cut takes its etcd and workloads down with it, a Ctrl-C in the
 * launcher's terminal reaches only the launcher (which then stops the nodes
 * in order), and processes a node leaves behind can be found and reported.
 *
 * A node can run in a network namespace of its own (`netns`, hosts mode:
 * testbed.ts): it is spawned through `nsenter --net`, which execs node, so
 * all of the above holds unchanged — its PID and process group are the node's.
 */
import { spawn, type ChildProcess } from "node:child_process";
import {
  createWriteStream,
  existsSync,
  readdirSync,
  readFileSync,
  type WriteStream,
} from "node:fs";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import {
  isProgressEvent,
  type NodeProgressEvent,
  type NodeProgressEventName,
  readProgressEvent,
} from "@metropolis/supervisor/node-progress";
import { LocalClusterError } from "./errors";
import { tool } from "./host-command";

/** Default number of output lines a NodeProcess keeps. */
export const defaultBufferLines = 20_000;
/** Default time `stop()` waits after SIGTERM before it cuts the power. */
export const defaultStopTimeoutMs = 30_000;

/** Something went wrong with a node process; the base of this module's errors. */
export class NodeProcessError extends LocalClusterError {}

/** The node binary has not been built. */
export class NodeBinaryMissingError extends NodeProcessError {
  constructor(readonly path: string) {
    super(`${path} does not exist: build it with \`npx tsc -b packages/node\``);
  }
}

/** The process exited while a caller waited for it to do something. */
export class NodeExitedError extends NodeProcessError {
  constructor(
    readonly node: string,
    readonly exit: NodeExit,
    readonly waitingFor: string,
    readonly stderr: string,
  ) {
    super(
      `${node} ${describeExit(exit)} while waiting for ${waitingFor}` +
        (stderr.trim() ? `; its stderr:\n${stderr.trimEnd()}` : ""),
    );
  }
}

/** No matching line arrived before the deadline. */
export class LogWaitTimeoutError extends NodeProcessError {
  constructor(
    readonly node: string,
    readonly waitingFor: string,
    readonly timeoutMs: number,
  ) {
    super(`${node}: no log line ${waitingFor} within ${timeoutMs / 1000} s`);
  }
}

/** How a node process ended. */
export interface NodeExit {
  /** Exit code, or null when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** "exited with code 1" / "was killed by SIGKILL". */
export function describeExit(exit: NodeExit): string {
  return exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
}

/** One output line of a node, with the fields of its JSON log line when it is one. */
export interface NodeLine {
  /** Position in the node's output, counting from 0; see `NodeProcess.cursor()`. */
  seq: number;
  /** The NodeProcess's name, e.g. `node2`. */
  node: string;
  stream: "stdout" | "stderr";
  /** The line as the node wrote it. */
  raw: string;
  /** The log line's distinguished name (`root.roleserver.heartbeat`); `""` for the root. */
  dn?: string;
  level?: string;
  message?: string;
  time?: string;
  meta?: Record<string, unknown>;
  /** The progress event the line carries (in `meta.progress`), if any. */
  progress?: NodeProgressEvent;
}

/** Parses one output line; JSON log lines get their fields, anything else is kept raw. */
export function parseNodeLine(
  raw: string,
  node: string,
  stream: "stdout" | "stderr",
  seq: number,
): NodeLine {
  const line: NodeLine = { seq, node, stream, raw };
  if (!raw.startsWith("{")) return line;
  try {
    const parsed = JSON.parse(raw) as Record<string, unknown>;
    if (typeof parsed.dn === "string") line.dn = parsed.dn;
    if (typeof parsed.level === "string") line.level = parsed.level;
    if (typeof parsed.message === "string") line.message = parsed.message;
    if (typeof parsed.time === "string") line.time = parsed.time;
    if (typeof parsed.meta === "object" && parsed.meta !== null) {
      line.meta = parsed.meta as Record<string, unknown>;
      line.progress = readProgressEvent(parsed.meta);
    }
  } catch {
    // Not JSON after all: keep it raw.
  }
  return line;
}

/**
 * Where `metropolis-node` is: `$METROPOLIS_NODE_BINARY` when set (to run
 * another build), else packages/node/dist/main.js of this repository.
 */
export function nodeBinaryPath(): string {
  const override = process.env.METROPOLIS_NODE_BINARY;
  if (override) return override;
  try {
    return join(dirname(require.resolve("@metropolis/node/package.json")), "dist", "main.js");
  } catch {
    // Not linked into node_modules: the repository layout.
    return join(__dirname, "..", "..", "packages", "node", "dist", "main.js");
  }
}

export interface NodeProcessOptions {
  /** Name in logs and errors, e.g. `node2`. */
  name: string;
  /** `--root`: the node's storage. */
  root: string;
  /** `--address`: the IPv4 address the node binds and is reached at. */
  address: string;
  /** `--parameters`: node parameters (only needed until the node has enrolled). */
  parametersPath?: string;
  /** `--config`: the node's JSON configuration. */
  configPath?: string;
  /** More flags after those above (e.g. `--recover-from FILE --owner-key KEY`). */
  extraArgs?: readonly string[];
  /** The node binary; default `nodeBinaryPath()`. */
  binary?: string;
  /** Called with every output line as it arrives (to forward them). */
  onLine?: (line: NodeLine) => void;
  /** How many lines to keep; default 20 000. */
  bufferLines?: number;
  /** How long `stop()` waits after SIGTERM before SIGKILL; default 30 s. */
  stopTimeoutMs?: number;
  /** Extra environment for the node. */
  env?: Record<string, string>;
  /** A file every output line is appended to, as written (JSON log lines stay JSON). */
  logFile?: string;
  /**
   * The network namespace (its name under /run/netns, e.g. a testbed host's
   * `Testbed.namespace(i)`) to run the node in: it is spawned as
   * `nsenter --net=/run/netns/NETNS -- node …`, which switches only the
   * network namespace (its tmpfs mounts and unix sockets stay the host's)
   * and execs node, so `pid` is still the node's and its process group the
   * node's own. Default: the launcher's network namespace.
   */
  netns?: string;
}

/** A pending wait, offered every new line. */
type LineWaiter = (line: NodeLine) => void;

/** A running (or exited) `metropolis-node` child process. */
export class NodeProcess {
  /** The node's PID (also its process group ID). */
  readonly pid: number;
  /** Resolves once the process has exited (never rejects). */
  readonly exited: Promise<NodeExit>;
  /** Set once the process has exited. */
  exit: NodeExit | undefined;
  /**
   * After `stop()`: whether processes of the node's group (etcd, workloads)
   * were still alive after the node itself exited; they were killed.
   */
  leftovers = false;

  private readonly child: ChildProcess;
  private readonly buffer: (NodeLine | undefined)[];
  private nextSeq = 0;
  private waiters = new Set<LineWaiter>();
  private readonly stopTimeoutMs: number;
  private readonly logFile: WriteStream | undefined;

  private constructor(private readonly opts: NodeProcessOptions) {
    const binary = opts.binary ?? nodeBinaryPath();
    if (!existsSync(binary)) throw new NodeBinaryMissingError(binary);
    this.buffer = new Array<NodeLine | undefined>(opts.bufferLines ?? defaultBufferLines);
    this.stopTimeoutMs = opts.stopTimeoutMs ?? defaultStopTimeoutMs;
    const args = [binary, "--root", opts.root, "--address", opts.address];
    if (opts.parametersPath) args.push("--parameters", opts.parametersPath);
    if (opts.configPath) args.push("--config", opts.configPath);
    if (opts.extraArgs) args.push(...opts.extraArgs);
    // nsenter execs node after switching the network namespace: the PID stays the node's.
    const [command, commandArgs] = opts.netns
      ? [tool("nsenter"), [`--net=/run/netns/${opts.netns}`, "--", process.execPath, ...args]]
      : [process.execPath, args];
    this.child = spawn(command, commandArgs, {
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
      env: { ...process.env, ...opts.env },
    });
    if (this.child.pid === undefined) {
      throw new NodeProcessError(`${opts.name}: could not start ${command} ${binary}`);
    }
    this.pid = this.child.pid;
    this.logFile = opts.logFile ? createWriteStream(opts.logFile, { flags: "a" }) : undefined;
    this.logFile?.on("error", () => undefined);
    const outputs = [
      this.readLines(this.child.stdout!, "stdout"),
      this.readLines(this.child.stderr!, "stderr"),
    ];
    const exitCode = new Promise<NodeExit>((resolve) =>
      this.child.once("exit", (code, signal) => resolve({ code, signal })),
    );
    // The exit is reported once every line the node wrote has been read.
    this.exited = Promise.all([exitCode, ...outputs]).then(async ([exit]) => {
      if (this.logFile) await new Promise((resolve) => this.logFile!.end(resolve));
      this.exit = exit;
      return exit;
    });
  }

  /** Starts `metropolis-node`. @throws NodeBinaryMissingError when it has not been built. */
  static start(opts: NodeProcessOptions): NodeProcess {
    return new NodeProcess(opts);
  }

  get name(): string {
    return this.opts.name;
  }

  get address(): string {
    return this.opts.address;
  }

  get root(): string {
    return this.opts.root;
  }

  /** The network namespace it runs in (`NodeProcessOptions.netns`), if not the launcher's. */
  get netns(): string | undefined {
    return this.opts.netns;
  }

  /** Whether the node process is still running. */
  get running(): boolean {
    return this.exit === undefined;
  }

  /** The sequence number the next line will get: pass it as `since` to wait only for new lines. */
  cursor(): number {
    return this.nextSeq;
  }

  /** The kept lines (oldest first), optionally only those from `since` on. */
  lines(since = 0): NodeLine[] {
    const size = this.buffer.length;
    const first = Math.max(since, this.nextSeq - size, 0);
    const out: NodeLine[] = [];
    for (let seq = first; seq < this.nextSeq; seq++) out.push(this.buffer[seq % size]!);
    return out;
  }

  /** The kept stderr output, as text. */
  stderr(): string {
    return this.lines()
      .filter((l) => l.stream === "stderr")
      .map((l) => l.raw + "\n")
      .join("");
  }

  /**
   * Resolves with the first line (from `since` on, default: every kept line)
   * for which `predicate` holds.
   *
   * @param what how the line is described in errors, e.g. `"elected leader"`.
   * @throws LogWaitTimeoutError when none arrives within `timeoutMs`.
   * @throws NodeExitedError when the process exits first.
   */
  waitForLog(
    predicate: (line: NodeLine) => boolean,
    timeoutMs: number,
    opts: { since?: number; what?: string; signal?: AbortSignal } = {},
  ): Promise<NodeLine> {
    return this.waitForLine((line) => (predicate(line) ? line : undefined), timeoutMs, {
      ...opts,
      what: opts.what ?? "matching the predicate",
    });
  }

  /**
   * Resolves with the first progress event named `event` (from `since` on)
   * for which `where` holds, e.g. `waitForProgress("consensus.serving", …)`.
   *
   * @throws LogWaitTimeoutError when none arrives within `timeoutMs`.
   * @throws NodeExitedError when the process exits first.
   */
  waitForProgress<E extends NodeProgressEventName>(
    event: E,
    timeoutMs: number,
    opts: {
      since?: number;
      signal?: AbortSignal;
      where?: (event: NodeProgressEvent<E>) => boolean;
    } = {},
  ): Promise<NodeProgressEvent<E>> {
    const pick = ({ progress }: NodeLine) =>
      isProgressEvent(progress, event) && (opts.where?.(progress) ?? true) ? progress : undefined;
    return this.waitForLine(pick, timeoutMs, { ...opts, what: `progress event ${event}` });
  }

  /** The first `pick(line)` that is not undefined, of the kept lines from `since` on or of new ones. */
  private waitForLine<T>(
    pick: (line: NodeLine) => T | undefined,
    timeoutMs: number,
    opts: { since?: number; what: string; signal?: AbortSignal },
  ): Promise<T> {
    const { what, signal } = opts;
    for (const line of this.lines(opts.since ?? 0)) {
      const picked = pick(line);
      if (picked !== undefined) return Promise.resolve(picked);
    }
    return new Promise<T>((resolve, reject) => {
      const waiter: LineWaiter = (line) => {
        const picked = pick(line);
        if (picked !== undefined) done(() => resolve(picked));
      };
      const timer = setTimeout(
        () => done(() => reject(new LogWaitTimeoutError(this.name, what, timeoutMs))),
        timeoutMs,
      );
      const onAbort = () => done(() => reject(signal?.reason));
      const done = (settle: () => void) => {
        this.waiters.delete(waiter);
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        settle();
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.add(waiter);
      void this.exited.then((exit) => {
        if (this.waiters.has(waiter)) {
          done(() => reject(new NodeExitedError(this.name, exit, what, this.stderr())));
        }
      });
    });
  }

  /**
   * Shuts the node down as init would: SIGTERM to its PID, then waits until
   * it has exited. If it has not after the stop timeout, its whole process
   * group gets SIGKILL. Processes of its group still alive after it exited
   * (an etcd or workload it left behind) are killed, and `leftovers` is set.
   */
  async stop(): Promise<NodeExit> {
    if (this.exit) return this.exit;
    this.signal(this.pid, "SIGTERM");
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), this.stopTimeoutMs);
    });
    const outcome = await Promise.race([this.exited, timedOut]);
    clearTimeout(timer);
    if (outcome === "timeout") return this.kill();
    if (this.groupAlive()) {
      this.leftovers = true;
      this.signal(-this.pid, "SIGKILL");
    }
    return outcome;
  }

  /** Cuts the power: SIGKILL to the node and every process of its group; resolves once all are gone. */
  async kill(): Promise<NodeExit> {
    if (!this.exit) this.signal(-this.pid, "SIGKILL");
    const exit = await this.exited;
    // The group's other processes die with it, but not in the same instant.
    const deadline = Date.now() + 5000;
    while (this.groupAlive() && Date.now() < deadline) {
      this.signal(-this.pid, "SIGKILL");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return exit;
  }

  /** Whether any process of the node's process group is alive (zombies do not count). */
  groupAlive(): boolean {
    const members = processGroupMembers(this.pid);
    if (members !== undefined) return members.length > 0;
    try {
      process.kill(-this.pid, 0);
      return true;
    } catch {
      return false;
    }
  }

  private signal(target: number, signal: NodeJS.Signals): void {
    try {
      process.kill(target, signal);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ESRCH") throw e;
    }
  }

  private async readLines(stream: NodeJS.ReadableStream, name: "stdout" | "stderr"): Promise<void> {
    for await (const raw of createInterface({ input: stream, crlfDelay: Infinity })) {
      const line = parseNodeLine(raw, this.name, name, this.nextSeq++);
      this.buffer[line.seq % this.buffer.length] = line;
      this.logFile?.write(name === "stderr" ? `[stderr] ${raw}\n` : raw + "\n");
      this.opts.onLine?.(line);
      for (const waiter of [...this.waiters]) waiter(line);
    }
  }
}

/**
 * PIDs of the living (not zombie) processes of process group `pgid`, from
 * /proc; undefined where there is no /proc.
 */
export function processGroupMembers(pgid: number): number[] | undefined {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return undefined;
  }
  const members: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // exited meanwhile
    }
    // pid (comm) state ppid pgrp …; comm may contain spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(fields[2]) === pgid && fields[0] !== "Z" && fields[0] !== "X") {
      members.push(Number(entry));
    }
  }
  return members;
}
