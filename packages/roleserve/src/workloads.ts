/**
 * The workloads launcher: this project's stand-in for Monogon's Kubernetes
 * worker. While the node holds the Kubernetes worker role it runs the
 * workload processes it was configured with; without the role it runs none.
 *
 * It follows seed 004's launcher pattern: it decides once per run, from the
 * roles it finds, and when the worker flag flips it fails with
 * RolesChangedError. The supervisor then cancels its children (stopping the
 * processes) and runs it again, and the new run decides afresh. Nothing here
 * starts or stops a process by hand, so a process can never outlive the
 * decision that started it.
 */
import { isRunnableName, type Runnable, runnableNamePattern } from "@metropolis/supervisor";
import { logProgress } from "@metropolis/supervisor/node-progress";
import { commandRunnable } from "@metropolis/supervisor/process";
import type { common } from "@metropolis/proto";
import { InvalidWorkloadError, RolesChangedError } from "./errors";
import type { RoleserveValues } from "./values";

/** A process the node runs while it holds the Kubernetes worker role. */
export interface WorkloadSpec {
  /** Its name: the child's name in the supervision tree (`…workloads.<name>`), so `[a-z0-9_-]{1,64}`. */
  name: string;
  /** The executable (a path, or a name looked up in PATH). */
  command: string;
  args?: string[];
  /** Added to the node's environment, which the process inherits. */
  env?: Record<string, string>;
}

export interface WorkloadsOptions {
  workloads: readonly WorkloadSpec[];
}

/**
 * Throws InvalidWorkloadError for the first spec that cannot be run. A
 * workload's name is a child's name in the supervision tree, so it is checked
 * with the supervisor's rule here, when the node is configured, and not first
 * when the role arrives.
 */
export function validateWorkloads(workloads: readonly WorkloadSpec[]): void {
  const seen = new Set<string>();
  for (const spec of workloads) {
    if (spec.name === "") throw new InvalidWorkloadError(spec.name, "name is empty");
    if (!isRunnableName(spec.name))
      throw new InvalidWorkloadError(spec.name, `a name must match ${runnableNamePattern.source}`);
    if (seen.has(spec.name)) throw new InvalidWorkloadError(spec.name, "declared twice");
    seen.add(spec.name);
    if (spec.command.trim() === "") throw new InvalidWorkloadError(spec.name, "command is empty");
  }
}

const holdsWorker = (roles: common.NodeRoles) => roles.kubernetesWorker !== undefined;

/**
 * The workloads launcher: once `values.localRoles` is known, runs every
 * workload as a supervised child process while the node is a Kubernetes
 * worker, and publishes `values.workloadStatus`. Fails with
 * RolesChangedError when the worker role is given or taken away.
 *
 * @throws InvalidWorkloadError at once, for an invalid or duplicate spec.
 */
export function workloadsWorker(values: RoleserveValues, opts: WorkloadsOptions): Runnable {
  validateWorkloads(opts.workloads);
  const workloads = opts.workloads.map((w) => ({ ...w, args: [...(w.args ?? [])] }));
  return async (ctx) => {
    const roles = values.localRoles.watch();
    try {
      const running = holdsWorker(await roles.get({ signal: ctx.signal }));
      if (running) {
        for (const spec of workloads) {
          ctx.run(
            spec.name,
            commandRunnable(spec.command, spec.args, { env: { ...process.env, ...spec.env } }),
          );
        }
      }
      const names = running ? workloads.map((w) => w.name) : [];
      values.workloadStatus.set({ running, workloads: names });
      logProgress(
        ctx.logger,
        running
          ? `kubernetes worker: running ${workloads.length} workload(s)`
          : "not a kubernetes worker: running no workloads",
        { event: "workloads.changed", worker: running, workloads: names },
      );
      ctx.healthy();
      await roles.get({ signal: ctx.signal, filter: (r) => holdsWorker(r) !== running });
      throw new RolesChangedError("workloads", !running);
    } catch (e) {
      if (ctx.signal.aborted) return;
      throw e;
    } finally {
      roles.close();
    }
  };
}
