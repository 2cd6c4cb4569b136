/**
 * What every scenario of the curator benchmark works with, passed to it as
 * one object instead of module-level state: the configuration, the cluster,
 * the curator processes started so far, loopback addresses for new curators,
 * and progress lines on stderr.
 */
import { performance } from "node:perf_hooks";
import type { Cluster } from "./cluster";
import type { BenchConfig } from "./config";
import type { CuratorProcesses } from "./curator-processes";

export interface BenchContext {
  readonly config: BenchConfig;
  readonly cluster: Cluster;
  /** Every curator child process started and not yet exited. */
  readonly processes: CuratorProcesses;
  /** A loopback address for a new curator to listen on. */
  readonly nextHost: () => string;
  /** Prints a progress line on stderr, so that a slow phase shows while it runs. */
  readonly progress: (what: string) => void;
}

/** Progress lines stamped with the seconds since this was called. */
export function progressReporter(): (what: string) => void {
  const started = performance.now();
  return (what) =>
    console.error(`[${((performance.now() - started) / 1000).toFixed(1)} s] ${what}`);
}

/** Curators listen on loopback addresses of their own: 127.0.0.<base + n>, 40 of them in turn. */
export function loopbackHosts(): () => string {
  const base = 10 + Math.floor(Math.random() * 200);
  let used = 0;
  return () => `127.0.0.${base + (used++ % 40)}`;
}
