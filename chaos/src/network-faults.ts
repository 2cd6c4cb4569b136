/**
 * The network faults of a chaos run on the testbed (local-cluster's
 * `Network`: iptables in the hosts' namespaces), and the topologies behind
 * them as pure functions of the hosts and the seeded PRNG, so that the
 * shapes are tested without a testbed and a seed replays them:
 *
 * - `isolate`: one host cut off from every other host.
 * - `split`: the consensus members split into a minority (1 … ⌊(m−1)/2⌋)
 *   and a majority; the other hosts join either side at random.
 * - `ring`: majorities ring (Jepsen): the members on a shuffled ring, each
 *   reaching only its nearest neighbours — every member sees a majority of
 *   the members, and no two see the same majority (5 members: host i
 *   reaches i±1). Built from one cut per pair of members that are not
 *   neighbours (`Network.partition([[a], [b]])` cuts one pair); hosts that
 *   are not members are untouched. Needs at least 4 members.
 * - `bridge`: the members in two halves that cannot reach each other, and
 *   one member, the bridge, reaching both (`partition([half1, half2])` with
 *   the bridge in no group).
 * - `isolate-leader` / `isolate-raft-leader`: the host of the curator
 *   leader (GetCurrentLeader) or of the etcd raft leader
 *   (GetClusterConsensus) cut off.
 * - `block-port`: a gray failure, one TCP port of a member dead between
 *   hosts: etcd's peer port 7834 or the curator's 7835.
 * - `loss`: 20–40 % of the packets from other hosts to one host dropped.
 *
 * The owner (the chaos process, on the bridge) always reaches every host:
 * faults are between hosts only. Every fault is healed by `Network.heal()`,
 * which removes every rule: one network fault is in place at a time.
 */
import type { Network } from "@metropolis/local-cluster";
import type { Prng } from "./prng";

/** A network fault of the nemesis. */
export type NetworkFaultKind =
  | "isolate"
  | "split"
  | "ring"
  | "bridge"
  | "isolate-leader"
  | "isolate-raft-leader"
  | "block-port"
  | "loss";

/** Every network fault kind, in the order the nemesis draws from. */
export const networkFaultKinds: readonly NetworkFaultKind[] = [
  "isolate",
  "split",
  "ring",
  "bridge",
  "isolate-leader",
  "isolate-raft-leader",
  "block-port",
  "loss",
];

/** etcd's peer port and the curator's (local-cluster's node ports). */
export const etcdPeerPort = 7834;
export const curatorPeerPort = 7835;

/** A fault as the network is told it: a list of partitions (applied in order), an isolation, … */
export type NetworkChange =
  | { kind: "partitions"; groups: number[][][] }
  | { kind: "isolate"; host: number }
  | { kind: "block-port"; host: number; port: number }
  | { kind: "loss"; host: number; probability: number };

/** A planned network fault: what to tell the network, and how to name it. */
export interface NetworkPlan {
  kind: NetworkFaultKind;
  change: NetworkChange;
  /** The host it is about (the isolated one, the bridge), if one. */
  host?: number;
  /** For the timeline and the log, e.g. "ring 1-3-5-2-4", "split [1,4] | [2,3,5,6]". */
  label: string;
}

/** A copy of `items` in an order drawn from `prng` (Fisher–Yates). */
export function shuffled<T>(items: readonly T[], prng: Prng): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = prng.int(0, i);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

const group = (hosts: readonly number[]): string =>
  `[${[...hosts].sort((a, b) => a - b).join(",")}]`;

/**
 * Majority / minority: a minority of 1 … ⌊(m−1)/2⌋ members against the
 * rest; the other hosts join a side at random.
 */
export function splitGroups(
  members: readonly number[],
  others: readonly number[],
  prng: Prng,
): [number[], number[]] {
  const order = shuffled(members, prng);
  const minoritySize = prng.int(1, Math.max(1, Math.floor((members.length - 1) / 2)));
  const minority = order.slice(0, minoritySize);
  const majority = order.slice(minoritySize);
  for (const h of others) (prng.chance(0.5) ? minority : majority).push(h);
  return [minority, majority];
}

/**
 * Majorities ring: the members in a shuffled cycle, each reaching the
 * members within ring distance d = ⌈⌊m/2⌋/2⌉ (5 members: its two
 * neighbours): it sees 2d+1 of the m members, a majority, and no two
 * members see the same set. Returns the cycle and the pairs to cut (every
 * pair farther apart than d); none for fewer than 4 members, where every
 * majority is everyone.
 */
export function ringCuts(
  members: readonly number[],
  prng: Prng,
): { cycle: number[]; cuts: Array<[number, number]> } {
  const cycle = shuffled(members, prng);
  const m = cycle.length;
  const d = Math.ceil(Math.floor(m / 2) / 2);
  const cuts: Array<[number, number]> = [];
  if (2 * d + 1 >= m) return { cycle, cuts };
  for (let i = 0; i < m; i++) {
    for (let j = i + 1; j < m; j++) {
      const distance = Math.min(j - i, m - (j - i));
      if (distance > d) cuts.push([cycle[i], cycle[j]]);
    }
  }
  return { cycle, cuts };
}

/**
 * Bridge: one member reaching two halves of the other members that cannot
 * reach each other; the other hosts join a half at random.
 */
export function bridgeGroups(
  members: readonly number[],
  others: readonly number[],
  prng: Prng,
): { bridge: number; halves: [number[], number[]] } {
  const [bridge, ...rest] = shuffled(members, prng);
  const half = Math.ceil(rest.length / 2);
  const halves: [number[], number[]] = [rest.slice(0, half), rest.slice(half)];
  for (const h of others) halves[prng.chance(0.5) ? 0 : 1].push(h);
  return { bridge, halves };
}

/**
 * Which hosts each host reaches under `groups` (every partition of a list
 * applied together, as the network adds faults up): for tests and the log.
 */
export function reachability(
  hosts: readonly number[],
  groups: number[][][],
): Map<number, number[]> {
  const cut = new Set<string>();
  for (const partition of groups) {
    partition.forEach((g, i) => {
      for (const other of partition.slice(i + 1)) {
        for (const a of g) for (const b of other) cut.add(`${a}-${b}`).add(`${b}-${a}`);
      }
    });
  }
  return new Map(hosts.map((h) => [h, hosts.filter((o) => !cut.has(`${h}-${o}`))]));
}

/** What the planner needs: the hosts, and where the leaders are. */
export interface PlanContext {
  prng: Prng;
  /** The consensus members' hosts. */
  members: readonly number[];
  /** The other hosts. */
  others: readonly number[];
  /** The host whose curator leads, if one could be found. */
  curatorLeader: () => Promise<number | undefined>;
  /** The host of the etcd raft leader, if one could be found. */
  raftLeader: () => Promise<number | undefined>;
}

/**
 * Plans a network fault of `kind`; undefined when it cannot be made now
 * (no leader found, a ring of fewer than 4 members).
 */
export async function planNetworkFault(
  kind: NetworkFaultKind,
  ctx: PlanContext,
): Promise<NetworkPlan | undefined> {
  const { prng, members, others } = ctx;
  switch (kind) {
    case "isolate": {
      const host = prng.pick([...members, ...others]);
      return { kind, host, change: { kind: "isolate", host }, label: `isolate host${host}` };
    }
    case "isolate-leader":
    case "isolate-raft-leader": {
      const host = await (kind === "isolate-leader" ? ctx.curatorLeader() : ctx.raftLeader());
      if (host === undefined) return undefined;
      const what = kind === "isolate-leader" ? "curator leader" : "raft leader";
      return {
        kind,
        host,
        change: { kind: "isolate", host },
        label: `isolate ${what} host${host}`,
      };
    }
    case "split": {
      const groups = splitGroups(members, others, prng);
      return {
        kind,
        change: { kind: "partitions", groups: [groups] },
        label: `split ${groups.map(group).join(" | ")}`,
      };
    }
    case "ring": {
      const { cycle, cuts } = ringCuts(members, prng);
      if (cuts.length === 0) return undefined;
      return {
        kind,
        change: { kind: "partitions", groups: cuts.map(([a, b]) => [[a], [b]]) },
        label: `ring ${cycle.join("-")}`,
      };
    }
    case "bridge": {
      const { bridge, halves } = bridgeGroups(members, others, prng);
      return {
        kind,
        host: bridge,
        change: { kind: "partitions", groups: [halves] },
        label: `bridge host${bridge}: ${halves.map(group).join(" | ")}`,
      };
    }
    case "block-port": {
      const host = prng.pick(members);
      const port = prng.pick([etcdPeerPort, curatorPeerPort]);
      return {
        kind,
        host,
        change: { kind: "block-port", host, port },
        label: `block port ${port} of host${host}`,
      };
    }
    case "loss": {
      const host = prng.pick([...members, ...others]);
      const probability = Math.round(prng.between(0.2, 0.4) * 100) / 100;
      return {
        kind,
        host,
        change: { kind: "loss", host, probability },
        label: `loss ${Math.round(probability * 100)}% to host${host}`,
      };
    }
  }
}

/** Tells `network` to make `change` (partitions one after the other: they add up). */
export async function applyNetworkChange(network: Network, change: NetworkChange): Promise<void> {
  switch (change.kind) {
    case "partitions":
      for (const groups of change.groups) await network.partition(groups);
      return;
    case "isolate":
      return network.isolate(change.host);
    case "block-port":
      return network.blockPort(change.host, change.port);
    case "loss":
      return network.loss(change.host, change.probability);
  }
}
