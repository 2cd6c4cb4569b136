/**
 * The checks at the end of a chaos run, once every fault is healed: every
 * node UP and HEALTHY again (and how long that took from the last fault),
 * every consensus member a voting etcd member again, etcd's membership
 * equal to the nodes with the consensus role, and no member having removed
 * its etcd data (the inode of its `data/etcd/data/member` directory is the
 * same as at the start, and its log never says it removed etcd data).
 *
 * Also: every node process runs at the end (the nemesis starts again every
 * node it stopped, so one that is not running stopped on its own); and,
 * from the run's own records (`checkAnswers`), no call was answered
 * INTERNAL — a server's own failure, never what a fault should cause (a node
 * takes it for a refusal: see the README's bug 1) — and every fault was made
 * and healed as planned (a role change the cluster refused, say).
 *
 * Guarantees: each check is a result, never an exception: a check that
 * could not be done failed, with the reason in `detail`.
 */
import { stat, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describeExit, type ClusterNode, type ClusterView } from "@metropolis/local-cluster";
import { InvariantFailure } from "./errors";
import type { Operation } from "./history";
import type { FaultRecord } from "./nemesis";

/** One final invariant and whether it held. */
export interface InvariantResult {
  name: string;
  ok: boolean;
  detail: string;
}

/** Node `node`'s etcd data: its member directory. */
export function etcdDataDir(node: ClusterNode): string {
  return join(node.root, "data", "etcd", "data", "member");
}

/** The inode of each member's etcd data directory (undefined when it has none). */
export async function etcdDataMarkers(
  members: readonly ClusterNode[],
): Promise<Map<string, number | undefined>> {
  const markers = new Map<string, number | undefined>();
  for (const m of members) {
    markers.set(
      m.name,
      await stat(etcdDataDir(m)).then(
        (s) => s.ino,
        () => undefined,
      ),
    );
  }
  return markers;
}

/** A node's stderr (a boxed fatal error) on one line, cut short. */
function oneLine(stderr: string): string {
  return stderr
    .split("\n")
    .map((l) => l.replace(/[│┌┐└┘├┤─]/g, "").trim())
    .filter((l) => l !== "")
    .join(" ")
    .slice(0, 400);
}

/** What a node logs when it drops its etcd data (see e2e/rogue.test.ts). */
const removedEtcdData = /removed .*etcd data/;

/**
 * Polls (up to `timeoutMs`) until the curator leader sees every node UP and
 * HEALTHY; returns when (run clock), or undefined when it did not happen.
 */
export async function waitAllHealthy(
  view: ClusterView,
  nodes: readonly ClusterNode[],
  now: () => number,
  timeoutMs = 60_000,
): Promise<number | undefined> {
  try {
    await view.allHealthy(nodes, timeoutMs);
    return now();
  } catch {
    return undefined;
  }
}

/** The final invariants; see the module comment. */
export async function checkInvariants(args: {
  view: ClusterView;
  members: readonly ClusterNode[];
  markers: ReadonlyMap<string, number | undefined>;
  allHealthyAt: number | undefined;
  logsDir: string;
}): Promise<InvariantResult[]> {
  const { view, members } = args;
  const results: InvariantResult[] = [];
  // The nemesis starts every node it stopped again: a node not running now stopped on its own.
  const gone = view.cluster.nodes.filter((n) => !n.process?.running);
  results.push({
    name: "every node process running (none exited on its own)",
    ok: gone.length === 0,
    detail:
      gone.length === 0
        ? "yes"
        : gone
            .map((n) => {
              const exit = n.process?.exit;
              const why = exit ? describeExit(exit) : "never started";
              return `${n.name} ${why}: ${oneLine(n.process?.stderr() ?? "")}`;
            })
            .join("; "),
  });
  const check = async (name: string, fn: () => Promise<string>) => {
    try {
      results.push({ name, ok: true, detail: await fn() });
    } catch (e) {
      results.push({ name, ok: false, detail: e instanceof Error ? e.message : String(e) });
    }
  };
  results.push({
    name: "every node UP and HEALTHY within 60 s of the last fault",
    ok: args.allHealthyAt !== undefined,
    detail: args.allHealthyAt === undefined ? "not within 60 s" : "yes",
  });
  await check("every consensus member a voting etcd member", async () => {
    const seen = await view.votingMembers(members, 60_000);
    return `${seen.length} members each list ${seen[0]?.length ?? 0} voters`;
  });
  await check("etcd membership = the nodes with the consensus role", async () => {
    const withRole = (await view.cluster.listNodes())
      .filter((n) => n.roles.includes("consensus"))
      .map((n) => n.id)
      .sort();
    for (const m of members) {
      const names = (await view.etcdMembers(m)).map((x) => x.name).sort();
      if (names.join() !== withRole.join()) {
        throw new InvariantFailure(
          `${m.name}'s etcd lists ${names.join(", ")}; consensus role: ${withRole.join(", ")}`,
        );
      }
    }
    return `${withRole.length} members`;
  });
  await check("no member removed its etcd data", async () => {
    const now = await etcdDataMarkers(members);
    for (const m of members) {
      const before = args.markers.get(m.name);
      if (before === undefined || now.get(m.name) !== before) {
        throw new InvariantFailure(
          `${m.name}'s etcd data directory changed (inode ${before} → ${now.get(m.name)})`,
        );
      }
      const log = await readFile(join(args.logsDir, `${m.name}.log`), "utf8").catch(() => "");
      const line = log.split("\n").find((l) => removedEtcdData.test(l));
      if (line) throw new InvariantFailure(`${m.name} logged: ${line.slice(0, 300)}`);
    }
    return "same inodes, no removal logged";
  });
  return results;
}

/**
 * The checks of the run's own records: no call of the workload or the
 * nemesis answered INTERNAL, and every fault made and healed (see the module
 * comment). Each lists at most five examples.
 */
export function checkAnswers(
  history: readonly Operation[],
  faults: readonly FaultRecord[],
): InvariantResult[] {
  const internal = [
    ...history
      .filter((op) => op.error?.startsWith("INTERNAL") ?? false)
      .map(
        (op) =>
          `#${op.id} ${op.type}${op.servedBy ? ` (served by ${op.servedBy})` : ""}: ${op.error ?? ""}`,
      ),
    ...faults
      .filter((f) => f.error?.includes("INTERNAL") ?? false)
      .map(
        (f) =>
          `${f.label ?? `${f.kind} ${f.node}`} at ${(f.start / 1000).toFixed(1)} s: ${f.error ?? ""}`,
      ),
  ];
  const broken = faults.filter((f) => f.error !== undefined);
  const examples = (lines: string[]) =>
    lines.slice(0, 5).join("; ") + (lines.length > 5 ? `; … ${lines.length - 5} more` : "");
  return [
    {
      name: "no call answered INTERNAL",
      ok: internal.length === 0,
      detail: internal.length === 0 ? "none" : `${internal.length}: ${examples(internal)}`,
    },
    {
      name: "every fault made and healed as planned",
      ok: broken.length === 0,
      detail:
        broken.length === 0
          ? `${faults.length} faults`
          : `${broken.length} of ${faults.length}: ${examples(
              broken.map((f) => `${f.label ?? `${f.kind} ${f.node}`}: ${f.error ?? ""}`),
            )}`,
    },
  ];
}
