/**
 * The multi-host testbed: n "machines" on one Linux host, each a network
 * namespace of its own with one interface (`eth0`, the end of a veth),
 * all on one bridge, each with its own address in a /24 of 198.18.0.0/15
 * (the range reserved for network test beds). The bridge has the /24's
 * `.1`: the owner's side, where the test or launcher process and its
 * in-process metroctl sit, reaching every host by its address. Host `i`
 * (1-based) has `.(i+1)`, as node `i` of a loopback cluster has 127.0.0.(i+1).
 *
 *     owner (this process, host namespace) 198.18.X.1 ── bridge mtb<s>br
 *        ├── veth mtb<s>v1 ── eth0 198.18.X.2  namespace mtb<s>h1  (node1)
 *        ├── veth mtb<s>v2 ── eth0 198.18.X.3  namespace mtb<s>h2  (node2)
 *        └── …
 *
 * What it is for: a cluster whose nodes really talk over a network, so that
 * the network between them can be cut, partitioned or made lossy by the
 * kernel's packet filter (network.ts) — which loopback cannot do per node.
 * LocalCluster runs node `i` on host `i` (its `hosts` option).
 *
 * Guarantees:
 * - Testbeds that exist at the same time (jest workers in parallel, a
 *   launcher) never share a name nor a subnet: each holds a slot of its own
 *   (testbed-slot.ts), and a /24 the host already routes is never picked.
 * - A process runs on host `i` with `nsenter --net=<namespace> -- cmd`:
 *   only the network namespace is switched (not `ip netns exec`, which
 *   also unshares the mount namespace), so a node's tmpfs mounts and unix
 *   sockets are the host's, and nsenter execs the command: the PID spawned
 *   is the command's.
 * - `destroy()` removes every object it made — veths, namespaces, bridge
 *   (the iptables rules of network.ts live inside the namespaces and go with
 *   them) — after SIGKILLing any process still in a namespace, and nothing
 *   is ever left in the host namespace's iptables.
 * - What a testbed whose owner died (SIGKILL mid-run included) left behind
 *   is removed by the next `Testbed.create` on the machine, before it
 *   builds its own, processes in its namespaces included.
 *
 * `Testbed.available()` says in one line why a testbed cannot be built here
 * (not root, a tool missing), so callers fall back to loopback.
 */
import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process";
import { randomInt } from "node:crypto";
import { LocalClusterError } from "./errors";
import { runCommand, tool, type CommandOutput } from "./host-command";
import { testbedAvailability, type TestbedAvailability } from "./testbed-availability";
import {
  bridgeName,
  findSlotObjects,
  maxHosts,
  namespaceName,
  processesIn,
  removeDeadSlots,
  removeSlotObjects,
  slotCount,
  slotOfAddress,
  slotPrefix,
  slotTag,
  SlotLock,
  vethName,
} from "./testbed-slot";

/** The testbed cannot be built or used as asked. */
export class TestbedError extends LocalClusterError {}

/** This machine cannot run a testbed (not root, a tool missing); the message says why. */
export class TestbedUnavailableError extends TestbedError {}

/** The subnet asked for is held by another testbed that is still running. */
export class TestbedBusyError extends TestbedError {}

export interface TestbedOptions {
  /** How many hosts (network namespaces) to make; more can be added with `addHost()`. */
  hosts: number;
  /**
   * The /24 to use, e.g. `198.18.37.0/24` (a resumed cluster's nodes keep
   * their addresses); default: a random free one of 198.18.0.0/15.
   */
  subnet?: string;
  /** Told what was removed of testbeds whose owner died (one line each); default: nothing. */
  log?: (message: string) => void;
}

/** A testbed of network namespaces on a bridge; see the module comment. */
export class Testbed {
  /** `mtb<slot>`: the prefix of every name it made. */
  readonly tag: string;
  /** Its /24, e.g. `198.18.37.0/24`. */
  readonly subnet: string;
  /** The bridge in the host namespace. */
  readonly bridge: string;
  /** The owner's address: the bridge's, `.1` of the subnet. */
  readonly ownerAddress: string;
  private hostCount = 0;
  private destroying: Promise<number[]> | undefined;
  private pending: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly slot: number,
    private readonly lock: SlotLock,
  ) {
    this.tag = slotTag(slot);
    this.subnet = `${slotPrefix(slot)}.0/24`;
    this.bridge = bridgeName(slot);
    this.ownerAddress = `${slotPrefix(slot)}.1`;
  }

  /** Whether a testbed can be built on this machine; when not, why (one line). */
  static available(): TestbedAvailability {
    return testbedAvailability();
  }

  /**
   * Removes what testbeds whose owner died left behind, then builds a new
   * one: a bridge with the owner's address and `hosts` namespaces, each
   * with `lo` up and `eth0` at its address. A failure half-way removes what
   * was built.
   *
   * @throws TestbedUnavailableError when `Testbed.available()` says no.
   * @throws TestbedBusyError when `subnet` is held by a running testbed.
   * @throws TestbedError for a bad option or a failed command (its cause).
   */
  static async create(opts: TestbedOptions): Promise<Testbed> {
    if (!Number.isInteger(opts.hosts) || opts.hosts < 1 || opts.hosts > maxHosts) {
      throw new TestbedError(`a testbed has 1 to ${maxHosts} hosts, not ${opts.hosts}`);
    }
    const availability = testbedAvailability();
    if (!availability.ok) throw new TestbedUnavailableError(availability.reason);
    const removed = await removeDeadSlots();
    for (const tag of removed.tags) {
      opts.log?.(`removed testbed ${tag}, left behind by an owner that died`);
    }
    if (removed.killed.length > 0) {
      opts.log?.(`killed processes left running on its hosts: ${removed.killed.join(", ")}`);
    }
    const lock = opts.subnet === undefined ? await takeFreeSlot() : await takeSlot(opts.subnet);
    const testbed = new Testbed(lock.slot, lock);
    try {
      // Left-overs in this very slot (a dead owner's, found after the sweep above) go first.
      const leftovers = (await findSlotObjects()).get(lock.slot);
      if (leftovers) await removeSlotObjects(leftovers);
      await testbed.ip("link", "add", testbed.bridge, "type", "bridge");
      await testbed.ip("addr", "add", `${testbed.ownerAddress}/24`, "dev", testbed.bridge);
      await testbed.ip("link", "set", testbed.bridge, "up");
      for (let i = 0; i < opts.hosts; i++) await testbed.buildHost();
    } catch (e) {
      await testbed.destroy().catch(() => undefined);
      throw e instanceof TestbedError
        ? e
        : new TestbedError(`building testbed ${testbed.tag} failed: ${message(e)}`, { cause: e });
    }
    return testbed;
  }

  /** How many hosts it has (host numbers are 1…hosts). */
  get hosts(): number {
    return this.hostCount;
  }

  /** Whether `destroy()` was called. */
  get destroyed(): boolean {
    return this.destroying !== undefined;
  }

  /** Host `host`'s address, `.(host+1)` of the subnet. @throws TestbedError for no such host. */
  address(host: number): string {
    this.check(host);
    return `${slotPrefix(this.slot)}.${host + 1}`;
  }

  /** The host whose address `address` is, if it is one of this testbed's. */
  hostOf(address: string): number | undefined {
    for (let host = 1; host <= this.hostCount; host++) {
      if (this.address(host) === address) return host;
    }
    return undefined;
  }

  /** Host `host`'s network namespace's name (`ip netns list` shows it). */
  namespace(host: number): string {
    this.check(host);
    return namespaceName(this.slot, host);
  }

  /** Host `host`'s network namespace as a file, what `nsenter --net=` takes. */
  namespacePath(host: number): string {
    return `/run/netns/${this.namespace(host)}`;
  }

  /**
   * The command line that runs `command` with `args` on host `host`:
   * `nsenter --net=/run/netns/NS -- command args…` (only the network
   * namespace is switched; nsenter execs `command`, keeping its PID).
   */
  commandLine(host: number, command: string, args: readonly string[]): [string, string[]] {
    return [tool("nsenter"), [`--net=${this.namespacePath(host)}`, "--", command, ...args]];
  }

  /** Spawns `command` on host `host` (see `commandLine`); the child's PID is the command's. */
  spawn(
    host: number,
    command: string,
    args: readonly string[],
    options: SpawnOptions = {},
  ): ChildProcess {
    const [nsenter, nsenterArgs] = this.commandLine(host, command, args);
    return spawn(nsenter, nsenterArgs, options);
  }

  /**
   * Runs `command` on host `host` to completion.
   * @throws HostCommandError when it fails.
   */
  exec(
    host: number,
    command: string,
    args: readonly string[],
    opts: { input?: string; timeoutMs?: number } = {},
  ): Promise<CommandOutput> {
    const [nsenter, nsenterArgs] = this.commandLine(host, command, args);
    return runCommand(nsenter, nsenterArgs, opts);
  }

  /** PIDs of the processes now running on host `host`. */
  processes(host: number): Promise<number[]> {
    return processesIn(this.namespace(host));
  }

  /**
   * Adds host number `hosts + 1` and resolves with its number.
   * @throws TestbedError when the subnet is full or the testbed destroyed.
   */
  addHost(): Promise<number> {
    return this.serially(async () => {
      if (this.hostCount >= maxHosts) {
        throw new TestbedError(`testbed ${this.tag} has ${maxHosts} hosts: its /24 is full`);
      }
      try {
        return await this.buildHost();
      } catch (e) {
        throw new TestbedError(`adding a host to ${this.tag} failed: ${message(e)}`, { cause: e });
      }
    });
  }

  /**
   * Removes everything the testbed made: SIGKILL to any process still on a
   * host (callers stop their nodes first: those are ones they forgot), the
   * veths, the namespaces (with their iptables rules), the bridge; then
   * gives its slot up. Resolves with the PIDs it had to kill. Safe to call
   * more than once.
   */
  destroy(): Promise<number[]> {
    this.destroying ??= this.pending
      .catch(() => undefined)
      .then(async () => {
        try {
          const objects = (await findSlotObjects()).get(this.slot);
          return objects ? await removeSlotObjects(objects) : [];
        } finally {
          await this.lock.release();
        }
      });
    return this.destroying;
  }

  /** Builds host number `hosts + 1`. */
  private async buildHost(): Promise<number> {
    if (this.destroyed) throw new TestbedError(`testbed ${this.tag} was destroyed`);
    const host = this.hostCount + 1;
    const ns = namespaceName(this.slot, host);
    const veth = vethName(this.slot, host);
    await this.ip("netns", "add", ns);
    // Counted as soon as it exists, so that a failure below still removes it.
    this.hostCount = host;
    await this.ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns);
    await this.ip("link", "set", veth, "master", this.bridge, "up");
    await this.ip("-n", ns, "addr", "add", `${this.address(host)}/24`, "dev", "eth0");
    await this.ip("-n", ns, "link", "set", "eth0", "up");
    await this.ip("-n", ns, "link", "set", "lo", "up");
    return host;
  }

  private async ip(...args: string[]): Promise<void> {
    await runCommand(tool("ip"), args);
  }

  private check(host: number): void {
    if (!Number.isInteger(host) || host < 1 || host > this.hostCount) {
      throw new TestbedError(`testbed ${this.tag} has hosts 1 to ${this.hostCount}, not ${host}`);
    }
  }

  /** Runs `fn` after every earlier `serially` call has finished. */
  private serially<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.pending.catch(() => undefined).then(fn);
    this.pending = run;
    return run;
  }
}

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** Takes a random free slot whose /24 the host does not already use. */
async function takeFreeSlot(): Promise<SlotLock> {
  const used = await usedSubnets();
  const order = Array.from({ length: slotCount }, (_, i) => i);
  for (let i = order.length - 1; i > 0; i--) {
    const j = randomInt(i + 1);
    [order[i], order[j]] = [order[j], order[i]];
  }
  for (const slot of order) {
    if (used.has(slot)) continue;
    const lock = await SlotLock.take(slot);
    if (lock) return lock;
  }
  throw new TestbedError(
    `every /24 of 198.18.0.0/15 is held by a running testbed or used by the host`,
  );
}

/** Takes the slot of `subnet` (a resumed cluster's). */
async function takeSlot(subnet: string): Promise<SlotLock> {
  const slot = slotOfAddress(subnet);
  if (slot === undefined || !subnet.endsWith(".0/24")) {
    throw new TestbedError(`${subnet} is not a /24 of 198.18.0.0/15 (e.g. 198.18.37.0/24)`);
  }
  const lock = await SlotLock.take(slot);
  if (!lock) {
    throw new TestbedBusyError(
      `${subnet} belongs to a testbed that is running (\`ss -xlp | grep metropolis-testbed-${slot}\` ` +
        "shows its process): stop it first",
    );
  }
  // Its left-overs are ours to remove; any other use of the /24 is not.
  const leftovers = (await findSlotObjects()).get(slot);
  if (leftovers) await removeSlotObjects(leftovers);
  if ((await usedSubnets()).has(slot)) {
    await lock.release();
    throw new TestbedError(`${subnet} is already used by an interface or route of this host`);
  }
  return lock;
}

/**
 * The slots whose /24 overlaps an address or route of the host namespace
 * (another test bed, a VPN): never picked.
 */
async function usedSubnets(): Promise<Set<number>> {
  const used = new Set<number>();
  const { stdout: routes } = await runCommand(tool("ip"), ["-4", "-o", "route", "show"]);
  const { stdout: addrs } = await runCommand(tool("ip"), ["-4", "-o", "addr", "show"]);
  const prefixes = [
    ...routes.split("\n").map((l) => l.split(" ")[0]),
    ...[...addrs.matchAll(/ inet (\S+)/g)].map((m) => m[1]),
  ];
  for (const prefix of prefixes) {
    const [address, lengthText] = prefix.split("/");
    if (address === undefined || !/^\d+\.\d+\.\d+\.\d+$/.test(address)) continue;
    const length = lengthText === undefined ? 32 : Number(lengthText);
    for (const slot of slotsOverlapping(address, length)) used.add(slot);
  }
  return used;
}

/** The slots (of 198.18.0.0/15) that `address/length` overlaps. */
function slotsOverlapping(address: string, length: number): number[] {
  const toInt = (a: string) => a.split(".").reduce((n, octet) => n * 256 + Number(octet), 0);
  const base = toInt("198.18.0.0");
  const size = 2 ** (32 - Math.min(Math.max(length, 0), 32));
  const start = Math.floor(toInt(address) / size) * size;
  const end = start + size; // exclusive
  const first = Math.max(start, base);
  const last = Math.min(end, base + slotCount * 256);
  const slots: number[] = [];
  if (length === 0) return slots; // a default route overlaps everything and uses nothing
  for (let a = first; a < last; a += 256) slots.push(Math.floor((a - base) / 256));
  return slots;
}
