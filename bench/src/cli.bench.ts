/**
 * CLI start-up benchmark: `npm run bench:cli` (issue 37, part 1).
 *
 * How long the executables take to answer, as ratios against `node -e 0`
 * measured in the same run: every round runs each command once, each right
 * after a `node -e 0` of its own (pairs, interleaved, so that a busy moment
 * of this shared machine falls on both alike), and the ratio is of the
 * medians of wall time, spawn to exit. Beside it, each run's CPU time (user
 * and system, from the kernel's account of reaped children, so nothing is
 * added to what runs) and the ratio of the means: what a command costs,
 * whatever else the machine is doing.
 *
 * | measure                                   | target          |
 * | ----------------------------------------- | --------------- |
 * | `metroctl --help` (the bin)                | ≤ 2× node -e 0  |
 * | `metroctl nodes -o json`, 1-node cluster   | ≤ 3× node -e 0  |
 * | `metropolis-node --help` (the bin)         | ≤ 2× node -e 0  |
 * | node boot: start to the first log line     | the bin ≤ tsc's output (no regression) |
 *
 * The bin is what the packages install (bin/metroctl.js,
 * bin/metropolis-node.js), which runs the bundle through V8's code cache, here in a cache directory of the run's own
 * ($XDG_CACHE_HOME), filled by an uncounted first round. Each command also
 * runs as the bundle alone (`node bundle/metroctl.js`: no cache), as tsc's
 * output (`dist/main.js`: the same lazily loading code, unbundled), and with
 * `--before DIR` as built in DIR, a checkout of an earlier commit
 * (`git clone` + `npm install`): the figures before the change. The cluster
 * is one `metropolis-node` (the bin) brought up by LocalCluster on a random
 * 127.X.Y.0/24, stopped by its PID at the end.
 * The node boots measured start a node of their own (a fresh root, no
 * parameters: it logs, starts its tree and stops for want of parameters) at
 * another loopback address.
 *
 * Flags: `--runs N` (rounds, default 20), `--before DIR`, `--no-cluster`
 * (skips `nodes`). Prints a table, writes reports/bench-cli.json.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { curatorPort, LocalCluster, randomLoopbackNet } from "@metropolis/local-cluster";
import { median, writeReport, type Row } from "./report";

const repo = resolve(__dirname, "..", "..");

/**
 * The two executables of a checkout: tsc's output, and (where built) the
 * bins — the bundles' launchers, which run them through V8's code cache —
 * and the bundles themselves, run without it.
 */
function executables(dir: string) {
  return {
    metroctlDist: join(dir, "packages", "metroctl", "dist", "main.js"),
    nodeDist: join(dir, "packages", "node", "dist", "main.js"),
    metroctlBin: join(dir, "packages", "metroctl", "bin", "metroctl.js"),
    nodeBin: join(dir, "packages", "node", "bin", "metropolis-node.js"),
    metroctlBundle: join(dir, "packages", "metroctl", "bundle", "metroctl.js"),
    nodeBundle: join(dir, "packages", "node", "bundle", "metropolis-node.js"),
  };
}

/** One way to run a command: what is spawned (`node` and its arguments). */
interface Variant {
  /** e.g. "bin", "tsc output", "before". */
  name: string;
  args: string[];
}

/** A command measured in several variants, each against `node -e 0`. */
interface Measure {
  name: string;
  variants: Variant[];
  /** The target of the first variant (the shipped bundle), as a ratio of medians. */
  target?: number;
}

/**
 * CPU time (user and system) of this process's children reaped so far, in
 * ms: /proc/self/stat's cutime and cstime, in clock ticks of 10 ms. Read
 * around one child's run it is that child's CPU time, with no change to
 * what is run; coarse per run, but a mean over the runs is not.
 */
function childrenCpuMs(): number {
  const stat = readFileSync("/proc/self/stat", "utf8");
  // Fields after the command name, which is in parentheses and may hold spaces.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // cutime and cstime are fields 16 and 17 of the whole line, 14 and 15 of these.
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

/** One run of a command: wall time from spawn to exit, and the child's CPU time. */
interface RunTimes {
  wallMs: number;
  cpuMs: number;
}

/** Runs `node args…` to its exit; rejects on a failed exit. */
function timeRun(args: readonly string[]): Promise<RunTimes> {
  return new Promise((resolvePromise, reject) => {
    const cpuBefore = childrenCpuMs();
    const started = process.hrtime.bigint();
    const child = spawn(process.execPath, args, { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.once("error", reject);
    child.once("close", (code) => {
      const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
      if (code === 0) resolvePromise({ wallMs, cpuMs: childrenCpuMs() - cpuBefore });
      else reject(new Error(`node ${args.join(" ")} exited ${code}: ${stderr.trim()}`));
    });
  });
}

/** Times from spawn to a node's first log line and to its "started" line. */
interface BootTimes {
  firstLine: number;
  started: number;
}

/**
 * Starts `metropolis-node` (`binary`) on a fresh root at `address`, without
 * parameters, and times its first log line and its `started` line; it then
 * stops by itself (no parameters), and is killed by its PID if it does not
 * within 30 s.
 */
async function timeBoot(binary: string, address: string, configPath: string): Promise<BootTimes> {
  const root = await mkdtemp(join(tmpdir(), "bench-cli-boot-"));
  try {
    return await new Promise<BootTimes>((resolvePromise, reject) => {
      const started = process.hrtime.bigint();
      const since = () => Number(process.hrtime.bigint() - started) / 1e6;
      const child = spawn(
        process.execPath,
        [binary, "--root", root, "--address", address, "--config", configPath],
        { stdio: ["ignore", "pipe", "pipe"] },
      );
      const pid = child.pid;
      const guard = setTimeout(() => {
        try {
          if (pid !== undefined) process.kill(pid, "SIGKILL");
        } catch {
          // Gone meanwhile.
        }
      }, 30_000);
      let firstLine: number | undefined;
      let startedLine: number | undefined;
      let buffered = "";
      child.stdout.on("data", (chunk: Buffer) => {
        buffered += chunk.toString();
        let newline: number;
        while ((newline = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, newline);
          buffered = buffered.slice(newline + 1);
          firstLine ??= since();
          if (startedLine === undefined && line.includes(`${address}: started`)) {
            startedLine = since();
          }
        }
      });
      child.stderr.resume();
      child.once("error", reject);
      child.once("close", () => {
        clearTimeout(guard);
        if (firstLine === undefined || startedLine === undefined) {
          reject(new Error(`${binary} ended without its first log line and "started"`));
        } else {
          resolvePromise({ firstLine, started: startedLine });
        }
      });
    });
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

/** min, median, max of samples. */
function spread(samples: readonly number[]) {
  return { min: Math.min(...samples), median: median(samples), max: Math.max(...samples) };
}

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

const format = (ms: number) => ms.toFixed(ms >= 100 ? 0 : 1);

/** One line of the table. */
interface Line {
  label: string;
  /** Wall times, ms. */
  samples: number[];
  /** The ratio of the wall-time medians to node -e 0's. */
  ratio?: string;
  goal?: string;
  /** CPU times, ms, and their mean's ratio to node -e 0's. */
  cpu?: number[];
  cpuRatio?: string;
}

/** Prints one line per variant: wall min/median/max, the ratio of medians to `node -e 0`, CPU. */
function printLines(lines: Line[]) {
  const rows = lines.map(({ label, samples, ratio, goal, cpu, cpuRatio }) => {
    const s = spread(samples);
    return [
      label,
      format(s.min),
      format(s.median),
      format(s.max),
      ratio ?? "",
      goal ?? "",
      cpu === undefined ? "" : format(mean(cpu)),
      cpuRatio ?? "",
    ];
  });
  const header = [
    "command (variant)",
    "min ms",
    "median ms",
    "max ms",
    "× node -e 0",
    "target",
    "CPU ms (mean)",
    "CPU ×",
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const show = (cells: string[]) =>
    cells
      .map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i])))
      .join("  ")
      .trimEnd();
  console.log(show(header));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const r of rows) console.log(show(r));
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: "string", default: "20" },
      before: { type: "string" },
      "no-cluster": { type: "boolean", default: false },
    },
  });
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 3)
    throw new Error(`--runs: at least 3, got ${values.runs}`);
  const now = executables(repo);
  const before = values.before === undefined ? undefined : executables(resolve(values.before));

  const work = await mkdtemp(join(tmpdir(), "bench-cli-"));
  // The bins' code cache, of this run alone (every child inherits it).
  process.env.XDG_CACHE_HOME = join(work, "cache");
  const bootConfig = join(work, "node-config.json");
  // Not a tmpfs: a boot the guard has to kill must not leave a mount behind.
  await writeFile(bootConfig, JSON.stringify({ ephemeralTmpfs: false }));
  const net = randomLoopbackNet();
  let cluster: LocalCluster | undefined;
  try {
    const measures: Measure[] = [
      {
        name: "metroctl --help",
        target: 2,
        variants: [
          { name: "bin", args: [now.metroctlBin, "--help"] },
          { name: "bundle without cache", args: [now.metroctlBundle, "--help"] },
          { name: "tsc output", args: [now.metroctlDist, "--help"] },
          ...(before ? [{ name: "before", args: [before.metroctlDist, "--help"] }] : []),
        ],
      },
      {
        name: "metroctl version",
        variants: [{ name: "bin", args: [now.metroctlBin, "version"] }],
      },
      {
        name: "metroctl completion bash",
        variants: [{ name: "bin", args: [now.metroctlBin, "completion", "bash"] }],
      },
      {
        name: "metropolis-node --help",
        target: 2,
        variants: [
          { name: "bin", args: [now.nodeBin, "--help"] },
          { name: "bundle without cache", args: [now.nodeBundle, "--help"] },
          { name: "tsc output", args: [now.nodeDist, "--help"] },
        ],
      },
    ];
    if (!values["no-cluster"]) {
      process.env.METROPOLIS_NODE_BINARY = now.nodeBin;
      const stateDir = join(work, "cluster");
      const running = new LocalCluster({ stateDir, nodes: 1, address: net, log: () => undefined });
      cluster = running;
      console.error(`bench:cli: bringing up a 1-node cluster on ${net(1)} …`);
      await running.up();
      const nodes = (variant: string, path: string): Variant => ({
        name: variant,
        args: [
          path,
          "--config",
          running.metroctlDir,
          "--endpoints",
          `${net(1)}:${curatorPort}`,
          "nodes",
          "-o",
          "json",
        ],
      });
      measures.push({
        name: "metroctl nodes -o json",
        target: 3,
        variants: [
          nodes("bin", now.metroctlBin),
          nodes("bundle without cache", now.metroctlBundle),
          nodes("tsc output", now.metroctlDist),
          ...(before ? [nodes("before", before.metroctlDist)] : []),
        ],
      });
    }

    const baseline: RunTimes[] = [];
    const samples = new Map<string, RunTimes[]>();
    const bootVariants: { name: string; binary: string }[] = [
      { name: "bin", binary: now.nodeBin },
      { name: "bundle without cache", binary: now.nodeBundle },
      { name: "tsc output", binary: now.nodeDist },
      ...(before ? [{ name: "before", binary: before.nodeDist }] : []),
    ];
    const boots = new Map<string, BootTimes[]>(bootVariants.map((v) => [v.name, []]));
    // One round first to warm the page cache; not counted. Every command
    // runs right after a `node -e 0` of its own: pairs, in every round.
    for (let round = -1; round < runs; round++) {
      const counted = round >= 0;
      for (const measure of measures) {
        for (const variant of measure.variants) {
          const base = await timeRun(["-e", "0"]);
          const times = await timeRun(variant.args);
          if (!counted) continue;
          baseline.push(base);
          const key = `${measure.name} (${variant.name})`;
          samples.set(key, [...(samples.get(key) ?? []), times]);
        }
      }
      for (const [i, variant] of bootVariants.entries()) {
        const times = await timeBoot(variant.binary, net(10 + i), bootConfig);
        if (counted) boots.get(variant.name)?.push(times);
      }
      if (counted) console.error(`bench:cli: round ${round + 1}/${runs}`);
    }

    const base = median(baseline.map((t) => t.wallMs));
    const baseCpu = mean(baseline.map((t) => t.cpuMs));
    const rows: Row[] = [];
    const lines: Line[] = [
      {
        label: "node -e 0",
        samples: baseline.map((t) => t.wallMs),
        cpu: baseline.map((t) => t.cpuMs),
      },
    ];
    for (const measure of measures) {
      for (const [i, variant] of measure.variants.entries()) {
        const key = `${measure.name} (${variant.name})`;
        const runsOf = samples.get(key) ?? [];
        const taken = runsOf.map((t) => t.wallMs);
        const cpu = runsOf.map((t) => t.cpuMs);
        const ratio = median(taken) / base;
        const target = i === 0 ? measure.target : undefined;
        lines.push({
          label: key,
          samples: taken,
          ratio: `${ratio.toFixed(2)}×`,
          goal: target === undefined ? "" : `≤ ${target}× ${ratio <= target ? "met" : "MISSED"}`,
          cpu,
          cpuRatio: `${(mean(cpu) / baseCpu).toFixed(2)}×`,
        });
        rows.push({
          measure: `${key} CPU / node -e 0 CPU (means)`,
          value: mean(cpu) / baseCpu,
          unit: "×",
        });
        rows.push({
          measure: `${key} / node -e 0 (medians)`,
          value: ratio,
          unit: "×",
          ...(target === undefined ? {} : { target: `≤ ${target}×`, met: ratio <= target }),
        });
        rows.push({ measure: `${key} median`, value: median(taken), unit: "ms" });
      }
    }
    const bootBundle = median((boots.get("bin") ?? []).map((b) => b.firstLine));
    const bootDist = median((boots.get("tsc output") ?? []).map((b) => b.firstLine));
    for (const variant of bootVariants) {
      const times = boots.get(variant.name) ?? [];
      const points: [string, (b: BootTimes) => number][] = [
        ["first log line", (b) => b.firstLine],
        ['"started" line', (b) => b.started],
      ];
      for (const [what, pick] of points) {
        const taken = times.map(pick);
        const key = `node boot to ${what} (${variant.name})`;
        lines.push({ label: key, samples: taken, ratio: `${(median(taken) / base).toFixed(2)}×` });
        rows.push({ measure: `${key} median`, value: median(taken), unit: "ms" });
      }
    }
    rows.push({
      measure: "node boot to first log line: bin / tsc output (medians)",
      value: bootBundle / bootDist,
      unit: "×",
      target: "≤ 1×",
      met: bootBundle <= bootDist,
    });

    console.log(
      `\ncli benchmark (node ${process.version}, ${new Date().toISOString()}, ${runs} rounds)`,
    );
    printLines(lines);
    console.log(
      `\nnode boot, bin / tsc output (first log line, medians): ${(bootBundle / bootDist).toFixed(2)}× (target ≤ 1×: ${bootBundle <= bootDist ? "met" : "MISSED"})`,
    );
    await writeReport("bench-cli.json", rows, console.log, {
      runs,
      before: values.before ?? null,
      samples: {
        "node -e 0": baseline,
        ...Object.fromEntries(samples),
        ...Object.fromEntries([...boots].map(([name, b]) => [`node boot (${name})`, b])),
      },
    });
  } finally {
    if (cluster) {
      const pids = cluster.started.map((p) => p.pid);
      await cluster.stop().catch(async () => cluster?.kill());
      console.error(`bench:cli: cluster stopped (PID ${pids.join(", ")})`);
    }
    await rm(work, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
