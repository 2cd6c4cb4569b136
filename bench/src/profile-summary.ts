/**
 * Sums up `.cpuprofile` files (V8's sampling profiles, as `cpu-profiler.ts`
 * and `--cpu-prof` write them): where the samples' time went by package
 * (this project's, a dependency's, Node's own, the garbage collector, idle),
 * by function (self time), and by function with what it called (inclusive
 * time: a function counted once per sample that has it on its stack), over
 * all the files given together. `--from`/`--to` take only the samples of a
 * window, in seconds since each profile started: a failover's profile split
 * at the election, say (curator README, "Cost model").
 *
 *   node bench/dist/profile-summary.js reports/profiles/host-*.cpuprofile [--top 40] [--from 0] [--to 12]
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
      `${why}\nusage: profile-summary FILE.cpuprofile... [--top N] [--from SECONDS] [--to SECONDS]`,
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
} {
  const files: string[] = [];
  const numbers = new Map<string, number>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!["--top", "--from", "--to"].includes(arg)) {
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
  if (files.length === 0) throw new ProfileSummaryUsageError("no profile given");
  if (!(top >= 1)) throw new ProfileSummaryUsageError(`--top must be at least 1, not ${top}`);
  if (!(toUs > fromUs)) throw new ProfileSummaryUsageError("--to must come after --from");
  return { files, top, fromUs, toUs };
}

/** A function as the tables name it: its name, file and line. */
function functionKey(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  return `${functionName || "(anonymous)"} ${url.split("/").slice(-2).join("/")}:${lineNumber + 1}`;
}

function main(argv: string[]): void {
  const { files, top, fromUs, toUs } = parseArgs(argv);
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
    for (let i = 1; i < profile.samples.length; i++) {
      const us = profile.timeDeltas[i] ?? 0;
      at += us;
      if (at < fromUs || at > toUs) continue;
      const node = nodes.get(profile.samples[i]);
      if (!node) continue;
      const { functionName, url } = node.callFrame;
      add(byPackage, packageOf(url, functionName), us);
      add(byFunction, functionKey(node), us);
      for (const fn of stackOf(node.id)) add(inclusive, fn, us);
      total += us;
    }
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
}

try {
  main(process.argv.slice(2));
} catch (e) {
  if (!(e instanceof ProfileSummaryUsageError)) throw e;
  console.error(e.message);
  process.exit(2);
}
