/**
 * Sums up `.cpuprofile` files (V8's sampling profiles, as `cpu-profiler.ts`
 * and `--cpu-prof` write them): where the samples' time went by package
 * (this project's, a dependency's, Node's own, the garbage collector, idle),
 * by function (self time), and by function with what it called (inclusive
 * time: a function counted once per sample that has it on its stack), over
 * all the files given together. `--from`/`--to` take only the samples of a
 * window, in seconds since each profile started: a failover's profile split
 * at the election, say (curator README, "Cost model"). `--stalls MS` lists
 * the stretches in which the thread never went idle for longer than MS,
 * longest first, each with where its time went: an event loop's stall, to
 * be looked into with `--from`/`--to`. Two cautions: a busy stretch is not
 * one task (a loaded loop runs task after task without going idle), and a
 * sample stands for the time since the one before it, so a thread that
 * waited for a CPU shows that wait as busy in whatever it ran then.
 *
 *   node bench/dist/profile-summary.js reports/profiles/host-*.cpuprofile [--top 40] [--from 0] [--to 12] [--stalls 500]
 */
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Where a function's code lives: `packages/<name>`, a dependency, Node itself, or V8's pseudo-frames. */
function packageOf(url: string, functionName: string): string {
  if (url === "") return functionName.startsWith("(") ? functionName : "(native)";
  const dep = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (dep) return dep[1];
  const ours = /packages\/([^/]+)\//.exec(url);
  if (ours) return `@metropolis/${ours[1]}`;
  if (url.startsWith("node:")) return "(node)";
  return url.includes("/bench/") ? "(bench)" : url;
}

/** Bad command line. */
class ProfileSummaryUsageError extends Error {
  constructor(why: string) {
    super(
      `${why}\nusage: profile-summary FILE.cpuprofile... [--top N] [--from SECONDS] [--to SECONDS] [--stalls MS]`,
    );
    this.name = new.target.name;
  }
}

/** The command line: the files, and the options with their values. */
function parseArgs(argv: readonly string[]): {
  files: string[];
  top: number;
  fromUs: number;
  toUs: number;
  /** Busy stretches longer than this are listed; undefined: none. */
  stallUs: number | undefined;
} {
  const files: string[] = [];
  const numbers = new Map<string, number>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!["--top", "--from", "--to", "--stalls"].includes(arg)) {
      if (arg.startsWith("--")) throw new ProfileSummaryUsageError(`unknown option ${arg}`);
      files.push(arg);
      continue;
    }
    const value = Number(argv[++i]);
    if (argv[i] === undefined || !Number.isFinite(value) || value < 0)
      throw new ProfileSummaryUsageError(`${arg} needs a number of at least 0, not ${argv[i]}`);
    numbers.set(arg, value);
  }
  const top = numbers.get("--top") ?? 30;
  const fromUs = (numbers.get("--from") ?? 0) * 1e6;
  const toUs = (numbers.get("--to") ?? Infinity) * 1e6;
  const stalls = numbers.get("--stalls");
  const stallUs = stalls === undefined ? undefined : stalls * 1e3;
  if (files.length === 0) throw new ProfileSummaryUsageError("no profile given");
  if (!(top >= 1)) throw new ProfileSummaryUsageError(`--top must be at least 1, not ${top}`);
  if (!(toUs > fromUs)) throw new ProfileSummaryUsageError("--to must come after --from");
  return { files, top, fromUs, toUs, stallUs };
}

/** A function as the tables name it: its name, file and line. */
function functionKey(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  return `${functionName || "(anonymous)"} ${url.split("/").slice(-2).join("/")}:${lineNumber + 1}`;
}

/** A stretch of a profile in which its thread never went idle, and where its time went. */
interface Stall {
  file: string;
  fromUs: number;
  toUs: number;
  byPackage: Map<string, number>;
  byFunction: Map<string, number>;
}

/** The `n` largest entries of `m`, as "share % key" over `total`, joined. */
function largest(m: Map<string, number>, total: number, n: number): string {
  return [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `${((100 * v) / total).toFixed(0)} % ${k}`)
    .join("; ");
}

function main(argv: string[]): void {
  const { files, top, fromUs, toUs, stallUs } = parseArgs(argv);
  const stalls: Stall[] = [];
  const byPackage = new Map<string, number>();
  const byFunction = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const add = (m: Map<string, number>, key: string, us: number) =>
    m.set(key, (m.get(key) ?? 0) + us);
  let total = 0;
  for (const file of files) {
    const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
    if (!Array.isArray(profile.nodes) || !Array.isArray(profile.samples))
      throw new Error(`${file} is not a CPU profile (no nodes and samples)`);
    const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
    const parent = new Map<number, number>();
    for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
    /** The distinct functions on a sample's stack, by its node (cached: stacks repeat). */
    const stacks = new Map<number, string[]>();
    const stackOf = (id: number): string[] => {
      let stack = stacks.get(id);
      if (stack) return stack;
      const seen = new Set<string>();
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const node = nodes.get(at);
        if (node && node.callFrame.functionName !== "(root)") seen.add(functionKey(node));
      }
      stack = [...seen];
      stacks.set(id, stack);
      return stack;
    };
    // A sample stands for the time since the one before it; the first one's
    // is the time since the profiler was asked to start, not a sample's.
    let at = profile.timeDeltas[0] ?? 0;
    // The busy stretch under way, if any (for --stalls).
    let stretch: Stall | undefined;
    const endStretch = (endUs: number) => {
      if (stretch && stallUs !== undefined && endUs - stretch.fromUs > stallUs)
        stalls.push({ ...stretch, toUs: endUs });
      stretch = undefined;
    };
    for (let i = 1; i < profile.samples.length; i++) {
      const us = profile.timeDeltas[i] ?? 0;
      at += us;
      if (at < fromUs || at > toUs) continue;
      const node = nodes.get(profile.samples[i]);
      if (!node) continue;
      const { functionName, url } = node.callFrame;
      const where = packageOf(url, functionName);
      add(byPackage, where, us);
      add(byFunction, functionKey(node), us);
      for (const fn of stackOf(node.id)) add(inclusive, fn, us);
      total += us;
      if (where === "(idle)") {
        endStretch(at - us);
      } else {
        stretch ??= {
          file,
          fromUs: at - us,
          toUs: at,
          byPackage: new Map(),
          byFunction: new Map(),
        };
        add(stretch.byPackage, where, us);
        add(stretch.byFunction, functionKey(node), us);
      }
    }
    endStretch(at);
  }
  if (total === 0) throw new ProfileSummaryUsageError("no sample in the window given");
  const window =
    fromUs > 0 || toUs < Infinity
      ? `, from ${fromUs / 1e6} s to ${toUs === Infinity ? "the end" : `${toUs / 1e6} s`}`
      : "";
  const print = (title: string, m: Map<string, number>, n: number) => {
    console.log(
      `\n${title} (of ${(total / 1e6).toFixed(1)} s sampled in ${files.length} profiles${window})`,
    );
    for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, n))
      console.log(`${((100 * v) / total).toFixed(1).padStart(6)} %  ${k}`);
  };
  print("by package", byPackage, 25);
  print("by function, self time", byFunction, top);
  print("by function with what it called (inclusive time)", inclusive, top);
  if (stallUs === undefined) return;
  console.log(
    `\n${stalls.length} stretches busy for over ${stallUs / 1e3} ms (longest first, at most ${top}), by package and function (self time)`,
  );
  for (const st of stalls.sort((a, b) => b.toUs - b.fromUs - (a.toUs - a.fromUs)).slice(0, top)) {
    const ms = (st.toUs - st.fromUs) / 1e3;
    console.log(
      `${ms.toFixed(0).padStart(7)} ms  from ${(st.fromUs / 1e6).toFixed(2)} s  ${st.file}\n` +
        `           ${largest(st.byPackage, st.toUs - st.fromUs, 4)}\n` +
        `           ${largest(st.byFunction, st.toUs - st.fromUs, 5)}`,
    );
  }
}

try {
  main(process.argv.slice(2));
} catch (e) {
  if (!(e instanceof ProfileSummaryUsageError)) throw e;
  console.error(e.message);
  process.exit(2);
}
