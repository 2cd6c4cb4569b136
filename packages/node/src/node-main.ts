/**
 * The node's init, loaded by main.ts for anything but `--help`: places the
 * node's storage under `--root`, runs the node's supervision tree until
 * SIGTERM/SIGINT or the owner's NodeManagement.PowerOff, then stops it
 * gracefully and exits 0. NodeManagement.Reboot stops it the same way and
 * exits 75 ({@link rebootExitStatus}), for the node's service manager to
 * start it again (local-cluster does). An enrolment that cannot go on (the
 * seed's "trapdoor"), or the cluster deleting the running node, prints one
 * boxed error and exits 1. A node whose record, from the curator, asks it to
 * wipe itself (`metroctl node decommission --wipe`: NodeWipeOrderedError)
 * stops its tree, erases its storage (localstorage's wipeNodeStorage) and
 * exits 0, the power-off status, which its service manager does not restart;
 * a wipe that fails or leaves anything prints a boxed error naming what is
 * left and exits 1.
 */
import { copyFile } from "node:fs/promises";
import { NodeDeletedError, NodeWipeOrderedError } from "@metropolis/cluster";
import { silenceIpServerNameWarning } from "@metropolis/curator";
import { placeNodeRoot, wipeNodeStorage, type NodeRoot } from "@metropolis/localstorage";
import { supervise, type Supervisor } from "@metropolis/supervisor";
import { PrometheusSupervisorMetrics } from "@metropolis/supervisor/prometheus";
import type { Logger } from "winston";
import { formatFatal } from "./boxed-error";
import { Registry } from "prom-client";
import { hostMetricsRegistry } from "./metrics-server";
import { loadNodeConfig, NodeConfigError, type NodeConfig } from "./node-config";
import { nodeLogger } from "./node-logger";
import { rebootExitStatus, type PowerAction } from "./node-management";
import { recoverFrom } from "./recover-from";
import { nodeServices } from "./node-tree";

/** How long a graceful stop may take before the node exits anyway. */
const stopTimeoutMs = 20_000;

async function main(): Promise<number> {
  silenceIpServerNameWarning();
  let config;
  try {
    config = await loadNodeConfig(process.argv.slice(2));
  } catch (e) {
    if (e instanceof NodeConfigError) {
      process.stderr.write(`metropolis-node: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  const logger = nodeLogger();
  const storage = placeNodeRoot(config.root);
  await storage.esp.metropolis.mkdirAll();
  // In memory, emptied of whatever a killed earlier run left: the plain etcd
  // peer key etcd reads lives there, and must never reach a disk.
  const placement = await storage.ephemeral.placeInMemory({ tmpfs: config.ephemeralTmpfs });
  logger.info(
    placement.kind === "tmpfs"
      ? `ephemeral: tmpfs mounted on ${placement.path}`
      : `ephemeral: ${storage.ephemeral.fullPath} -> ${placement.path}` +
          (placement.tmpfsRefused === undefined ? "" : ` (no tmpfs: ${placement.tmpfsRefused})`),
  );
  try {
    if (config.recoverFrom !== undefined) {
      try {
        await recoverFrom(config, storage, logger);
      } catch (e) {
        process.stderr.write(
          formatFatal("the restore from a backup was refused or failed", e, "nothing was started") +
            "\n",
        );
        return e instanceof NodeConfigError ? 2 : 1;
      }
    }
    return await runTree(config, storage, logger);
  } finally {
    // Emptied and given back on every way out of a run that got this far.
    await storage.ephemeral.release().catch((e: unknown) => {
      logger.warn(`ephemeral: ${e instanceof Error ? e.message : String(e)}`);
    });
  }
}

/** Runs the node's supervision tree on placed storage until it stops; resolves with the exit code. */
async function runTree(config: NodeConfig, storage: NodeRoot, logger: Logger): Promise<number> {
  if (config.parametersPath && !(await storage.esp.metropolis.sealedConfiguration.exists())) {
    // Kept on the ESP like a real node's, so that a restart before
    // enrolment finished finds them without the flag.
    await copyFile(config.parametersPath, storage.esp.metropolis.parameters.fullPath);
    config = { ...config, parametersPath: undefined };
  }
  // The node's own metrics (/metrics/core) and its host's (/metrics/node).
  const registries = { core: new Registry(), node: hostMetricsRegistry() };
  let power: (action: PowerAction) => void = () => {};
  const services = nodeServices(config, storage, registries, (action) => power(action));
  // The debug service needs the supervisor that runs it: handed over lazily.
  const supervisor: Supervisor = supervise(
    services.root(() => supervisor),
    { logger, metrics: new PrometheusSupervisorMetrics(registries.core) },
  );
  logger.info(`metropolis-node ${config.address}: started (root ${config.root})`);

  // The exit status of a stop that was asked for: the tree's end may settle
  // `crashed` before `stopped`, and must not turn a reboot's 75 into 0.
  let stopCode: number | undefined;
  const stopped = new Promise<number>((resolve) => {
    const stop = (why: string, code: number) => {
      if (stopCode !== undefined) return;
      stopCode = code;
      logger.info(`${why}: stopping`);
      void supervisor.stop({ timeoutMs: stopTimeoutMs }).then(() => resolve(code));
    };
    process.once("SIGTERM", () => stop("SIGTERM", 0));
    process.once("SIGINT", () => stop("SIGINT", 0));
    power = (action) =>
      action === "reboot"
        ? stop(`reboot asked by the owner (exit status ${rebootExitStatus})`, rebootExitStatus)
        : stop("power off asked by the owner", 0);
  });
  // Stopping the tree after a failure also settles `done`: the exit code must stay 1.
  let failing = false;
  // Set when the cluster ordered a wipe: its outcome is the exit status,
  // whatever else settles first (the tree's end, a SIGTERM meanwhile).
  let wiping: Promise<number> | undefined;
  const failed = services.manager.failure.catch(async (e: unknown) => {
    failing = true;
    if (e instanceof NodeWipeOrderedError) {
      wiping = wipeAndPowerOff(e, supervisor, storage, logger);
      return wiping;
    }
    process.stderr.write(
      (e instanceof NodeDeletedError
        ? formatFatal("this node was deleted from its cluster", e, "metropolis-node stopped")
        : formatFatal("enrolment into the cluster failed", e)) + "\n",
    );
    await supervisor.stop({ timeoutMs: stopTimeoutMs });
    return 1;
  });
  const crashed = supervisor.done.then(
    () => (failing ? 1 : (stopCode ?? 0)),
    (e: unknown) => {
      process.stderr.write(formatFatal("the supervision tree failed", e) + "\n");
      return 1;
    },
  );
  const code = await Promise.race([stopped, failed, crashed]);
  return wiping ?? code;
}

/**
 * The cluster's order to wipe (see the top of this file): stops the tree
 * (etcd and every other writer below the data directory), erases the
 * storage, and resolves with the power-off status (0), or 1 when the tree
 * did not stop or the wipe is incomplete — never a silent half-wipe.
 */
async function wipeAndPowerOff(
  order: NodeWipeOrderedError,
  supervisor: Supervisor,
  storage: NodeRoot,
  logger: Logger,
): Promise<number> {
  logger.warn(
    `${order.message}: stopping, then wiping ${storage.data.fullPath} and ${storage.esp.fullPath}`,
  );
  try {
    await supervisor.stop({ timeoutMs: stopTimeoutMs });
    const report = await wipeNodeStorage(storage);
    const removed = report.emptied.map((d) => `${d.path} (${d.removed.length} entries)`);
    logger.warn(`wiped: ${removed.join(", ")} emptied; powering off (exit status 0)`);
    process.stderr.write(
      formatFatal(
        "this node was decommissioned and wiped by its cluster",
        order,
        `its storage is erased (${removed.join(", ")}); metropolis-node powered off`,
      ) + "\n",
    );
    return 0;
  } catch (e) {
    logger.error(
      `the wipe ordered by the cluster failed: ${e instanceof Error ? e.message : String(e)}`,
    );
    process.stderr.write(
      formatFatal(
        "the wipe ordered by the cluster FAILED: this node's storage is not fully erased",
        e,
        `metropolis-node stopped; erase ${storage.data.fullPath} and ${storage.esp.fullPath} by hand`,
      ) + "\n",
    );
    return 1;
  }
}

/** Runs `metropolis-node` with the process's command line, and exits with its status. */
export function runNode(): void {
  main().then(
    (code) => process.exit(code),
    (e: unknown) => {
      process.stderr.write(formatFatal("unexpected error", e) + "\n");
      process.exit(1);
    },
  );
}
