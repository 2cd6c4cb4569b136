/**
 * What the scale simulator and its node hosts (processes that each run a
 * share of the simulated nodes, see fixtures/node-host.ts) say to each other
 * over the IPC channel (`serialization: "advanced"`, so certificates and
 * keys travel as bytes). Every request carries an `id` its answer repeats.
 */
import type { CuratorAddress } from "@metropolis/curator";
import type { RegisteredNode } from "../curator/registration";
import type { LoopDelay } from "../loop-delay";

/** A node host's settings: its one command-line argument, as JSON. */
export interface NodeHostConfig {
  curators: CuratorAddress[];
  heartbeatIntervalMs: number;
  /** Where the host's nodes keep their files (see SimulatedNodes). */
  stateDir: string;
  /** The first two octets of the addresses its nodes report, unique per host. */
  addressPrefix: string;
}

/** What the simulator asks a node host. */
export type NodeHostCall =
  | { type: "add"; nodes: RegisteredNode[] }
  /** Start recording heartbeat latencies and the host's event loop delay (dropping earlier ones). */
  | { type: "startRecording" }
  /** Stop recording; answered with the latencies recorded, their send times, and the loop delay. */
  | { type: "stopRecording" }
  | { type: "log" }
  /** Start recording the host's event loop delay alone (a window of its own, e.g. a failover). */
  | { type: "startLoopDelay" }
  /** Stop it; answered with the loop delay. */
  | { type: "stopLoopDelay" }
  /**
   * With METROPOLIS_BENCH_HOST_PROFILE_DIR set, start profiling the host's
   * CPU (otherwise nothing); `stopProfile` writes the window's profile there
   * as `host-PID-NAME.cpuprofile`.
   */
  | { type: "startProfile" }
  | { type: "stopProfile"; name: string }
  /** Stop every node; answered once they are stopped (the host then exits). */
  | { type: "stop" };

/** A call as sent: with the `id` its answer repeats. */
export type NodeHostRequest = NodeHostCall & { id: number };

/** What the simulated nodes' supervisors logged: counted, not written. */
export interface NodeHostLog {
  errors: number;
  warnings: number;
  firstError: string | undefined;
  /** Errors by kind (numbers and IDs masked) since the host was last asked. */
  kinds?: Record<string, number>;
}

/** A node host's answer to request `id`. */
export interface NodeHostAnswer {
  id: number;
  latencies?: number[];
  /** When each of `latencies`' heartbeats was sent (epoch ms). */
  sentAt?: number[];
  loopDelay?: LoopDelay;
  log?: NodeHostLog;
  /** Where `stopProfile` wrote the profile (none when the host does not profile). */
  profile?: string;
  /** The request failed: why. */
  error?: string;
}
