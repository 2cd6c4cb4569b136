#!/usr/bin/env node
/**
 * The one-command local cluster:
 *
 *   node local-cluster/dist/main.js [--nodes N] [--state DIR] [--hosts] [--verbose]
 *
 * Brings up an N-node cluster of real `metropolis-node` processes on
 * 127.0.0.2…, every node a consensus member (or resumes the one in the state
 * dir from disk), prints the node table, then shows the nodes' logs until
 * Ctrl-C, which stops every node (SIGTERM by PID) and exits 0. Running it
 * again resumes the same cluster. Any failure is one clear error, the nodes
 * it started are stopped, and it exits 1. It refuses a state dir another
 * running launcher uses, and stops the nodes a killed launcher left behind
 * (state-dir-lock.ts).
 *
 * With `--hosts` every node runs in a network namespace of its own on a
 * bridge, at an address of a random /24 of 198.18.0.0/15 (testbed.ts; state
 * in .metropolis/hosts/ by default, resumed on the same /24); Ctrl-C then
 * also removes the namespaces and the bridge. Without root or the tools it
 * needs, it says why in one line and exits 1 before doing anything.
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { silenceIpServerNameWarning } from "@metropolis/curator";
import { LocalCluster } from "./cluster-launcher";
import { LocalClusterError } from "./errors";
import { formatNodeLine } from "./log-format";
import { describeExit } from "./node-process";
import { Testbed } from "./testbed";

const usage =
  "usage: node local-cluster/dist/main.js [--nodes N] [--state DIR] [--hosts] [--verbose]";

/** A bad command line. */
class UsageError extends LocalClusterError {}

interface Options {
  nodes: number;
  state: string;
  verbose: boolean;
  /** Every node in a network namespace of its own (testbed.ts). */
  hosts: boolean;
}

function parseOptions(argv: string[]): Options | "help" {
  let values: {
    nodes?: string;
    state?: string;
    verbose?: boolean;
    hosts?: boolean;
    help?: boolean;
  };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        nodes: { type: "string" },
        state: { type: "string" },
        verbose: { type: "boolean" },
        hosts: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  if (values.help) return "help";
  const nodes = values.nodes === undefined ? 3 : Number(values.nodes);
  if (!Number.isInteger(nodes) || nodes < 1 || nodes > 250) {
    throw new UsageError(`--nodes must be a whole number from 1 to 250, got ${values.nodes}`);
  }
  const hosts = values.hosts ?? false;
  return {
    nodes,
    // A hosts-mode cluster's nodes have testbed addresses: it has a state dir of its own.
    state: values.state ?? (hosts ? join(".metropolis", "hosts") : ".metropolis"),
    verbose: values.verbose ?? false,
    hosts,
  };
}

const print = (line: string) => process.stdout.write(line + "\n");
const printErr = (line: string) => process.stderr.write(line + "\n");

async function main(): Promise<number> {
  silenceIpServerNameWarning();
  let options: Options | "help";
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    printErr(`local-cluster: ${e.message}\n${usage}`);
    return 2;
  }
  if (options === "help") {
    print(usage);
    return 0;
  }

  if (options.hosts) {
    const availability = Testbed.available();
    if (!availability.ok) {
      printErr(`local-cluster: --hosts cannot run here: ${availability.reason}`);
      return 1;
    }
  }

  const interrupt = new AbortController();
  let showLogs = false;
  let stopping = false;
  const cluster = new LocalCluster({
    stateDir: options.state,
    nodes: options.nodes,
    hosts: options.hosts ? true : undefined,
    signal: interrupt.signal,
    log: print,
    onNodeLine: (line) => {
      if (!showLogs) return;
      const text = formatNodeLine(line, options.verbose);
      if (text !== undefined) print(text);
    },
  });

  // Ctrl-C (or SIGTERM): first stop every node gracefully; a second one cuts their power.
  let signalled: ((signal: string) => void) | undefined;
  const interrupted = new Promise<string>((resolve) => (signalled = resolve));
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      printErr(`${signal} again: killing every node (SIGKILL)`);
      void cluster.kill().then(() => {
        cluster.release();
        process.exit(130);
      });
      return;
    }
    stopping = true;
    interrupt.abort(new Error(`interrupted by ${signal}`));
    signalled!(signal);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);

  const stopAll = async () => {
    showLogs = false;
    const running = cluster.nodes.flatMap((n) => (n.process?.running ? [n.process] : []));
    const started = performance.now();
    if (running.length > 0) {
      print(`stopping ${running.map((p) => `${p.name} (pid ${p.pid})`).join(", ")}…`);
    }
    // Also when no node runs: in hosts mode it removes the testbed.
    await cluster.stop();
    if (running.length > 0) {
      print(`all nodes stopped in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    }
    cluster.release();
  };

  print(`local cluster in ${cluster.stateDir}`);
  let resumed: boolean;
  try {
    const up = cluster.up();
    up.catch(() => undefined);
    ({ resumed } = await up);
  } catch (e) {
    if (interrupt.signal.aborted) {
      printErr("interrupted while bringing the cluster up");
      await stopAll();
      return 130;
    }
    printErr(`local-cluster: bringing the cluster up failed: ${(e as Error).message ?? e}`);
    for (const node of cluster.nodes) {
      const stderr = node.process?.stderr().trim();
      if (stderr) printErr(`${node.name}'s stderr:\n${stderr}`);
    }
    stopping = true;
    await stopAll();
    return 1;
  }

  print("");
  print(await cluster.nodeTable());
  print("");
  for (const node of cluster.nodes) {
    const netns = node.process?.netns ? `  netns ${node.process.netns}` : "";
    print(`  ${node.name}  ${node.address}${netns}  pid ${node.process?.pid}  ${node.id}`);
  }
  print("");
  print(
    `cluster ${resumed ? "resumed" : "created"}: ${cluster.nodes.length} node(s) UP and HEALTHY. ` +
      `metroctl: node packages/metroctl/dist/main.js --config ${cluster.metroctlDir} nodes`,
  );
  print("showing the nodes' logs; Ctrl-C stops every node");
  print("");
  showLogs = true;

  for (const node of cluster.nodes) {
    void node.process?.exited.then((exit) => {
      if (!stopping) printErr(`[${node.name}] metropolis-node ${describeExit(exit)}`);
    });
  }
  const signal = await interrupted;
  print(`\n${signal}: stopping the cluster`);
  await stopAll();
  return 0;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    printErr(`local-cluster: unexpected error: ${e instanceof Error ? (e.stack ?? e.message) : e}`);
    process.exit(1);
  },
);
