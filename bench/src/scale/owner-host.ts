/**
 * The owners of the scale simulator's second failover — clients listing
 * every node once a second — in a child process at the node hosts'
 * priority (fixtures/owner-host.ts). In a cluster, operators and dashboards
 * run elsewhere; in the simulator's own process their decoding of every
 * node ten times a second (50 MB/s at 5,000 nodes) took a CPU from the
 * control plane and the simulated nodes, at normal priority, and the
 * failover measured was partly theirs.
 */
import { fork, type ChildProcess } from "node:child_process";
import { setPriority } from "node:os";
import { join } from "node:path";
import type { CuratorAddress, TlsPem } from "@metropolis/curator";
import { hostNiceness } from "./node-hosts";

/** The owner host's settings: its one command-line argument, as JSON. */
export interface OwnerHostConfig {
  count: number;
  caPem: string;
  owner: TlsPem;
  curators: CuratorAddress[];
}

/** What the owner host answers "stop" with. */
export interface OwnerHostResult {
  /** Listings answered, and the time each took (ms). */
  latencies: number[];
  failures: number;
}

/** Owners listing every node once a second, in a process of their own, until {@link stop}. */
export class OwnerHost {
  private readonly child: ChildProcess;
  private readonly exited: Promise<void>;
  /** The owners' process, for its CPU share (undefined when it could not be started). */
  readonly pid: number | undefined;

  constructor(config: OwnerHostConfig) {
    this.child = fork(
      join(__dirname, "..", "fixtures", "owner-host.js"),
      [JSON.stringify(config)],
      {
        stdio: ["ignore", "inherit", "inherit", "ipc"],
      },
    );
    this.pid = this.child.pid;
    if (this.pid !== undefined) setPriority(this.pid, hostNiceness);
    this.exited = new Promise((resolve) => this.child.once("exit", () => resolve()));
  }

  /** Stops the owners; resolves with what they measured once the process has exited. */
  async stop(): Promise<OwnerHostResult> {
    const result = new Promise<OwnerHostResult>((resolve, reject) => {
      this.child.once("message", (r: OwnerHostResult) => resolve(r));
      void this.exited.then(() => reject(new Error("the owner host exited without its figures")));
    });
    this.child.send("stop");
    try {
      return await result;
    } finally {
      await this.exited;
    }
  }
}
