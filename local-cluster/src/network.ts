/**
 * The network between a testbed's hosts, as tests and chaos runs break it:
 * partitions, a host cut off, one TCP port of a host dead (a gray failure),
 * random packet loss — and `heal()`. Built on the kernel's own packet
 * filter: iptables rules inside the hosts' network namespaces, so a fault
 * is exactly what a node on a real network would see (connections that
 * hang, SYNs that go unanswered), not a simulation in the code under test.
 *
 * How: every host's namespace gets a chain of its own, `MTB`, jumped to
 * first from INPUT and OUTPUT. A fault appends DROP rules to the chains of
 * the hosts it touches, in one `iptables-restore --noflush` per namespace
 * (each namespace's rules change at once); `heal()` flushes the chains.
 * After every change `conntrack -F` runs in the namespaces it touched. The
 * rules drop every matching packet whatever its connection state, so
 * connections already established are cut too, not only new ones.
 *
 * Guarantees:
 * - Faults are between hosts only: every rule names the other host's
 *   address, so the owner (the bridge address: the test process, its
 *   metroctl) always reaches every host, an isolated one included.
 * - Faults add up (a partition and a loss hold together) until `heal()`,
 *   which removes every rule this module added and flushes conntrack.
 * - A fault applies to the hosts the testbed has when it is made; a host
 *   added later is untouched by it.
 * - Changes happen one at a time, in the order they were asked for.
 * - `faults()` is the current fault set and `history()` every fault with
 *   when it began and was healed: a chaos run's timeline.
 *
 * Nothing is ever written to the host namespace's iptables, and the rules
 * go with the namespaces when the testbed is destroyed.
 */
import { LocalClusterError } from "./errors";
import { tool } from "./host-command";
import type { Testbed } from "./testbed";

/** A fault asked for makes no sense (an unknown host, a host in two groups, a bad probability). */
export class NetworkFaultError extends LocalClusterError {}

/** One fault of the network; hosts are the testbed's host numbers (1-based). */
export type NetworkFault =
  /** Hosts in different groups cannot talk; hosts in no group are untouched. */
  | { kind: "partition"; groups: number[][] }
  /** The host cannot talk to any other host (the owner still reaches it). */
  | { kind: "isolate"; host: number }
  /** TCP between the host and other hosts with `port` as either end's port is dropped. */
  | { kind: "blockPort"; host: number; port: number }
  /** Packets from other hosts to the host are dropped with `probability`. */
  | { kind: "loss"; host: number; probability: number };

/** A fault and when it was made (ms since the epoch); `healedAt` once `heal()` removed it. */
export interface FaultRecord {
  fault: NetworkFault;
  since: number;
  healedAt?: number;
}

/** `isolate host2`, `partition [1] | [2,3]`, …: a fault in a timeline's words. */
export function describeFault(fault: NetworkFault): string {
  switch (fault.kind) {
    case "partition":
      return `partition ${fault.groups.map((g) => `[${g.join(",")}]`).join(" | ")}`;
    case "isolate":
      return `isolate host${fault.host}`;
    case "blockPort":
      return `block tcp port ${fault.port} of host${fault.host}`;
    case "loss":
      return `drop ${Number((fault.probability * 100).toPrecision(6))}% of packets from other hosts to host${fault.host}`;
  }
}

/** The chain every rule of this module lives in, in each host's namespace. */
export const faultChain = "MTB";

/** The network of a testbed; see the module comment. */
export class Network {
  private readonly records: FaultRecord[] = [];
  /** Hosts whose namespace has the chain. */
  private readonly prepared = new Set<number>();
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(readonly testbed: Testbed) {}

  /** The network of `testbed`, with the fault chain in every host's namespace. One per testbed. */
  static async create(testbed: Testbed): Promise<Network> {
    const network = new Network(testbed);
    await network.serially(() => network.prepare(allHosts(testbed)));
    return network;
  }

  /** The faults in force now, oldest first. */
  faults(): NetworkFault[] {
    return this.records.filter((r) => r.healedAt === undefined).map((r) => r.fault);
  }

  /** Every fault made so far, with when it began and, once healed, when it ended. */
  history(): FaultRecord[] {
    return this.records.map((r) => ({ ...r }));
  }

  /**
   * Hosts in different groups of `groups` can no longer talk to each other;
   * hosts in no group are untouched.
   * @throws NetworkFaultError for an unknown host or one in two groups.
   */
  partition(groups: readonly (readonly number[])[]): Promise<void> {
    const copy = groups.map((g) => [...g]);
    const seen = new Set<number>();
    for (const host of copy.flat()) {
      this.checkHost(host);
      if (seen.has(host)) throw new NetworkFaultError(`host${host} is in two groups`);
      seen.add(host);
    }
    const rules = new Rules();
    for (const [i, group] of copy.entries()) {
      for (const other of copy.slice(i + 1)) {
        for (const a of group) for (const b of other) this.cut(rules, a, b);
      }
    }
    return this.apply({ kind: "partition", groups: copy }, rules);
  }

  /**
   * Cuts `host` off from every other host; the owner still reaches it.
   * @throws NetworkFaultError for an unknown host.
   */
  isolate(host: number): Promise<void> {
    this.checkHost(host);
    const rules = new Rules();
    for (const other of this.others(host)) this.cut(rules, host, other);
    return this.apply({ kind: "isolate", host }, rules);
  }

  /**
   * A gray failure: drops every TCP packet between `host` and another host
   * whose source or destination port is `port` — the host neither serves
   * that port to the other hosts nor reaches it on them (e.g. 7834, etcd's
   * peer port: the host's etcd member is cut off while its curator and
   * heartbeats still get through; or 7835, the curator's). The owner is
   * untouched.
   * @throws NetworkFaultError for an unknown host or a bad port.
   */
  blockPort(host: number, port: number): Promise<void> {
    this.checkHost(host);
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new NetworkFaultError(`${port} is no TCP port`);
    }
    const rules = new Rules();
    for (const other of this.others(host)) {
      const peer = this.testbed.address(other);
      const match = `-p tcp -m multiport --ports ${port}`;
      rules.add(host, `-s ${peer} ${match} -j DROP`, `-d ${peer} ${match} -j DROP`);
    }
    return this.apply({ kind: "blockPort", host, port }, rules);
  }

  /**
   * Drops packets from other hosts to `host` at random, each with
   * `probability` (1 drops every one); the owner's are untouched.
   * @throws NetworkFaultError for an unknown host or a probability outside (0, 1].
   */
  loss(host: number, probability: number): Promise<void> {
    this.checkHost(host);
    if (!(probability > 0 && probability <= 1)) {
      throw new NetworkFaultError(`a loss probability is in (0, 1], not ${probability}`);
    }
    const rules = new Rules();
    for (const other of this.others(host)) {
      rules.add(
        host,
        `-s ${this.testbed.address(other)} -m statistic --mode random ` +
          `--probability ${probability} -j DROP`,
      );
    }
    return this.apply({ kind: "loss", host, probability }, rules);
  }

  /**
   * Removes every rule this network added (flushes each host's chain) and
   * conntrack's entries: every host reaches every other again. Nothing to
   * do once the testbed is destroyed.
   */
  heal(): Promise<void> {
    return this.serially(async () => {
      const healedAt = Date.now();
      for (const record of this.records) record.healedAt ??= healedAt;
      if (this.testbed.destroyed) return;
      await Promise.all(
        [...this.prepared].map(async (host) => {
          await this.testbed.exec(host, tool("iptables"), ["-w", "-F", faultChain]);
          await this.flushConntrack(host);
        }),
      );
    });
  }

  /** The rules in host `host`'s chain now, as `iptables -S` prints them. */
  async rules(host: number): Promise<string[]> {
    this.checkHost(host);
    const { stdout } = await this.testbed.exec(host, tool("iptables"), ["-w", "-S", faultChain]);
    return stdout.split("\n").filter((l) => l.startsWith("-A "));
  }

  /** Rules that cut `a` and `b` apart, on both sides. */
  private cut(rules: Rules, a: number, b: number): void {
    const addressA = this.testbed.address(a);
    const addressB = this.testbed.address(b);
    rules.add(a, `-s ${addressB} -j DROP`, `-d ${addressB} -j DROP`);
    rules.add(b, `-s ${addressA} -j DROP`, `-d ${addressA} -j DROP`);
  }

  /** Adds `rules` to their hosts' chains, flushes conntrack there, and records `fault`. */
  private apply(fault: NetworkFault, rules: Rules): Promise<void> {
    return this.serially(async () => {
      if (this.testbed.destroyed) {
        throw new NetworkFaultError(`testbed ${this.testbed.tag} was destroyed`);
      }
      await this.prepare([...rules.byHost.keys()]);
      await Promise.all(
        [...rules.byHost].map(async ([host, lines]) => {
          const input = ["*filter", ...lines.map((l) => `-A ${faultChain} ${l}`), "COMMIT", ""];
          await this.testbed.exec(host, tool("iptables-restore"), ["-w", "--noflush"], {
            input: input.join("\n"),
          });
          await this.flushConntrack(host);
        }),
      );
      this.records.push({ fault, since: Date.now() });
    });
  }

  /** Makes the chain, jumped to first from INPUT and OUTPUT, where it is missing. */
  private async prepare(hosts: readonly number[]): Promise<void> {
    await Promise.all(
      hosts
        .filter((host) => !this.prepared.has(host))
        .map(async (host) => {
          const { stdout } = await this.testbed.exec(host, tool("iptables"), ["-w", "-S"]);
          if (!stdout.split("\n").includes(`-N ${faultChain}`)) {
            const input = [
              "*filter",
              `:${faultChain} - [0:0]`,
              `-I INPUT 1 -j ${faultChain}`,
              `-I OUTPUT 1 -j ${faultChain}`,
              "COMMIT",
              "",
            ];
            await this.testbed.exec(host, tool("iptables-restore"), ["-w", "--noflush"], {
              input: input.join("\n"),
            });
          }
          this.prepared.add(host);
        }),
    );
  }

  private async flushConntrack(host: number): Promise<void> {
    await this.testbed.exec(host, tool("conntrack"), ["-F"]);
  }

  private others(host: number): number[] {
    return allHosts(this.testbed).filter((h) => h !== host);
  }

  private checkHost(host: number): void {
    if (!Number.isInteger(host) || host < 1 || host > this.testbed.hosts) {
      throw new NetworkFaultError(
        `testbed ${this.testbed.tag} has hosts 1 to ${this.testbed.hosts}, not ${host}`,
      );
    }
  }

  /** Runs `fn` once every earlier change is done. */
  private serially<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.catch(() => undefined).then(fn);
    this.queue = run;
    return run;
  }
}

/** Hosts 1…n of `testbed`. */
function allHosts(testbed: Testbed): number[] {
  return Array.from({ length: testbed.hosts }, (_, i) => i + 1);
}

/** The rules a fault adds, by host. */
class Rules {
  readonly byHost = new Map<number, string[]>();

  add(host: number, ...rules: string[]): void {
    const lines = this.byHost.get(host) ?? [];
    lines.push(...rules);
    this.byHost.set(host, lines);
  }
}
