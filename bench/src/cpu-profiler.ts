/**
 * A CPU profile of this process over a window the benchmark chooses, taken
 * with the inspector (V8's sampling profiler), written as a `.cpuprofile`
 * that Chrome's DevTools open and `profile-summary.ts` sums up. `--cpu-prof`
 * covers a whole process and writes only at a clean exit; a failover or a
 * steady state is a window of a process's life.
 */
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector";

export class CpuProfiler {
  private readonly session = new Session();

  constructor() {
    this.session.connect();
  }

  /** Starts sampling (again, after `stop`). */
  start(): Promise<void> {
    return this.post("Profiler.enable").then(() => this.post("Profiler.start"));
  }

  /** Stops sampling and writes the profile to `path`; returns `path`. */
  async stop(path: string): Promise<string> {
    const profile = await new Promise<unknown>((resolve, reject) =>
      this.session.post("Profiler.stop", (err, result) =>
        err ? reject(err) : resolve(result.profile),
      ),
    );
    writeFileSync(path, JSON.stringify(profile));
    return path;
  }

  private post(method: "Profiler.enable" | "Profiler.start"): Promise<void> {
    return new Promise((resolve, reject) =>
      this.session.post(method, (err) => (err ? reject(err) : resolve())),
    );
  }
}
