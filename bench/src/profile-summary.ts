/**
 * Sums up `.cpuprofile` files (V8's sampling profiles, as `cpu-profiler.ts`
 * and `--cpu-prof` write them): where the samples' time went by package
 * (this project's, a dependency's, Node's own, the garbage collector, idle)
 * and by function (self time), over all the files given together.
 *
 *   node bench/dist/profile-summary.js reports/profiles/host-*.cpuprofile [--top 40]
 */
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
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

function main(argv: string[]): void {
  const topAt = argv.indexOf("--top");
  const top = topAt >= 0 ? Number(argv[topAt + 1]) : 30;
  const files = topAt < 0 ? argv : argv.filter((_, i) => i !== topAt && i !== topAt + 1);
  if (files.length === 0 || !(top > 0)) {
    console.error("usage: profile-summary FILE.cpuprofile... [--top N]");
    process.exit(2);
  }
  const byPackage = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let total = 0;
  for (const file of files) {
    const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
    if (!Array.isArray(profile.nodes) || !Array.isArray(profile.samples))
      throw new Error(`${file} is not a CPU profile (no nodes and samples)`);
    const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
    // A sample stands for the time since the one before it; the first one's
    // is the time since the profiler was asked to start, not a sample's.
    for (let i = 1; i < profile.samples.length; i++) {
      const us = profile.timeDeltas[i] ?? 0;
      const node = nodes.get(profile.samples[i]);
      if (!node) continue;
      const { functionName, url, lineNumber } = node.callFrame;
      const pkg = packageOf(url, functionName);
      byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + us);
      const fn = `${functionName || "(anonymous)"} ${url.split("/").slice(-2).join("/")}:${lineNumber + 1}`;
      byFunction.set(fn, (byFunction.get(fn) ?? 0) + us);
      total += us;
    }
  }
  const print = (title: string, m: Map<string, number>, n: number) => {
    console.log(
      `\n${title} (of ${(total / 1e6).toFixed(1)} s sampled in ${files.length} profiles)`,
    );
    for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, n))
      console.log(`${((100 * v) / total).toFixed(1).padStart(6)} %  ${k}`);
  };
  print("by package", byPackage, 25);
  print("by function, self time", byFunction, top);
}

main(process.argv.slice(2));
