/**
 * Testbed slots: how testbeds that run at the same time on one machine (jest
 * workers in parallel, a launcher) never collide, and how what a crashed
 * one left behind is found and removed.
 *
 * 198.18.0.0/15, the range reserved for network test beds (RFC 2544), holds
 * 512 /24s: slot `s` is 198.(18 + ⌊s/256⌋).(s mod 256).0/24, and every
 * kernel object of the testbed in that slot is named after it — tag
 * `mtb<s>`: bridge `mtb<s>br`, host `i`'s namespace `mtb<s>h<i>` and veth
 * `mtb<s>v<i>` (at most 13 characters, under the kernel's 15). One slot,
 * one set of names, one subnet: two testbeds that hold different slots
 * share nothing.
 *
 * A slot is held by listening on the abstract unix socket
 * `metropolis-testbed-<s>` (Linux's abstract namespace, no file): binding it
 * is atomic, so two processes never hold one slot, and the kernel frees it
 * the instant its holder dies, however it dies (SIGKILL included). A slot's
 * objects whose socket nobody holds are therefore the left-overs of a dead
 * owner — whichever PID it had, and whether or not the system has since
 * reused that PID. The one that removes them holds the slot meanwhile, so
 * a new testbed can never be built in a slot while its left-overs are
 * being removed. `ss -xlp | grep metropolis-testbed` shows which process
 * holds which slot.
 */
import { createServer, type Server } from "node:net";
import { HostCommandError, runCommand, tool } from "./host-command";

/** How many /24s 198.18.0.0/15 has: the number of testbeds that can exist at once. */
export const slotCount = 512;

/** The prefix of every kernel object name of a testbed. */
export const tagPrefix = "mtb";

/** Most hosts one testbed can have (.1 is the owner's bridge, .2….254 the hosts). */
export const maxHosts = 253;

/** `mtb<slot>`: the prefix of the names of slot `slot`'s kernel objects. */
export const slotTag = (slot: number): string => `${tagPrefix}${slot}`;

/** The slot's bridge. */
export const bridgeName = (slot: number): string => `${slotTag(slot)}br`;

/** Host `host`'s network namespace (under /run/netns). */
export const namespaceName = (slot: number, host: number): string => `${slotTag(slot)}h${host}`;

/** The host side of host `host`'s veth (the namespace side is `eth0`). */
export const vethName = (slot: number, host: number): string => `${slotTag(slot)}v${host}`;

/** The first three octets of slot `slot`'s /24, e.g. `198.18.37`. */
export function slotPrefix(slot: number): string {
  return `198.${18 + Math.floor(slot / 256)}.${slot % 256}`;
}

/** The slot whose /24 holds IPv4 address (or `a.b.c.0/24`) `address`, if it is in 198.18.0.0/15. */
export function slotOfAddress(address: string): number | undefined {
  const m = /^198\.(18|19)\.(\d{1,3})\.(\d{1,3})(?:\/24)?$/.exec(address);
  if (!m) return undefined;
  const third = Number(m[2]);
  const fourth = Number(m[3]);
  if (third > 255 || fourth > 255) return undefined;
  return (Number(m[1]) - 18) * 256 + third;
}

/** The slot of a kernel object name (`mtb37h2` → 37), if it is a testbed's. */
export function slotOfName(name: string): number | undefined {
  const m = /^mtb(\d{1,3})(?:br|h\d{1,3}|v\d{1,3})$/.exec(name);
  if (!m) return undefined;
  const slot = Number(m[1]);
  return slot < slotCount && String(slot) === m[1] ? slot : undefined;
}

/** The abstract socket that holds slot `slot` (the leading NUL puts it in the abstract namespace). */
const lockAddress = (slot: number): string => `\0metropolis-testbed-${slot}`;

/** This process's hold on one slot; see the module comment. */
export class SlotLock {
  private constructor(
    readonly slot: number,
    private readonly server: Server,
  ) {}

  /**
   * Takes slot `slot`: resolves with the lock, or undefined when a living
   * process holds it. The lock never keeps this process alive.
   */
  static take(slot: number): Promise<SlotLock | undefined> {
    return new Promise((resolve, reject) => {
      const server = createServer((socket) => socket.destroy());
      server.once("error", (e: NodeJS.ErrnoException) => {
        if (e.code === "EADDRINUSE") resolve(undefined);
        else reject(e);
      });
      server.listen(lockAddress(slot), () => {
        server.unref();
        resolve(new SlotLock(slot, server));
      });
    });
  }

  /** Gives the slot up. */
  release(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** A slot's kernel objects, as found. */
export interface SlotObjects {
  namespaces: string[];
  /** Bridge and host-side veths. */
  links: string[];
}

/** Every testbed kernel object on this machine, by slot. */
export async function findSlotObjects(): Promise<Map<number, SlotObjects>> {
  const found = new Map<number, SlotObjects>();
  const of = (slot: number): SlotObjects => {
    let objects = found.get(slot);
    if (!objects) {
      objects = { namespaces: [], links: [] };
      found.set(slot, objects);
    }
    return objects;
  };
  for (const name of await namespaceNames()) {
    const slot = slotOfName(name);
    if (slot !== undefined) of(slot).namespaces.push(name);
  }
  for (const name of await linkNames()) {
    const slot = slotOfName(name);
    if (slot !== undefined) of(slot).links.push(name);
  }
  return found;
}

/** Names of the network namespaces under /run/netns. */
export async function namespaceNames(): Promise<string[]> {
  const { stdout } = await runCommand(tool("ip"), ["-j", "netns", "list"]);
  return namesIn(stdout, "name");
}

/** Names of the links of the host's network namespace. */
export async function linkNames(): Promise<string[]> {
  const { stdout } = await runCommand(tool("ip"), ["-j", "link", "show"]);
  return namesIn(stdout, "ifname");
}

/** The `field` of every object of the JSON array `json` (`ip -j` prints nothing for none). */
function namesIn(json: string, field: string): string[] {
  if (json.trim() === "") return [];
  const parsed: unknown = JSON.parse(json);
  if (!Array.isArray(parsed)) return [];
  const names: string[] = [];
  for (const entry of parsed) {
    if (typeof entry !== "object" || entry === null) continue;
    const value: unknown = Reflect.get(entry, field);
    if (typeof value === "string") names.push(value);
  }
  return names;
}

/** PIDs of the processes in network namespace `namespace` (none when it does not exist). */
export async function processesIn(namespace: string): Promise<number[]> {
  try {
    const { stdout } = await runCommand(tool("ip"), ["netns", "pids", namespace]);
    return stdout
      .split("\n")
      .filter((l) => /^\d+$/.test(l.trim()))
      .map(Number);
  } catch (e) {
    if (e instanceof HostCommandError && /No such file|Invalid netns/.test(e.detail)) return [];
    throw e;
  }
}

/**
 * Removes `objects` (the caller holds their slot): SIGKILL to every process
 * still in one of the namespaces (a node a killed test process left
 * running, its etcd, its workloads), then the veths, the namespaces and the
 * bridge. Objects already gone are skipped. Resolves with the PIDs it killed.
 */
export async function removeSlotObjects(objects: SlotObjects): Promise<number[]> {
  const killed: number[] = [];
  for (const namespace of objects.namespaces) {
    for (const pid of await processesIn(namespace)) {
      try {
        process.kill(pid, "SIGKILL");
        killed.push(pid);
      } catch {
        // gone meanwhile
      }
    }
  }
  // Deleting the host side of a veth deletes its peer in the namespace too.
  const bridges = objects.links.filter((l) => l.endsWith("br"));
  for (const link of [...objects.links.filter((l) => !l.endsWith("br")), ...bridges]) {
    await ignoringGone(runCommand(tool("ip"), ["link", "del", link]));
  }
  for (const namespace of objects.namespaces) {
    await ignoringGone(runCommand(tool("ip"), ["netns", "del", namespace]));
  }
  return killed;
}

/** Awaits `command`, treating "it does not exist" as done. */
async function ignoringGone(command: Promise<unknown>): Promise<void> {
  try {
    await command;
  } catch (e) {
    if (e instanceof HostCommandError && /Cannot find device|No such file/.test(e.detail)) return;
    throw e;
  }
}

/**
 * Removes the objects of every slot nobody holds: what testbeds whose owner
 * died left behind. Each slot is held while its objects are removed.
 * Resolves with the tags removed and the PIDs killed.
 */
export async function removeDeadSlots(): Promise<{ tags: string[]; killed: number[] }> {
  const tags: string[] = [];
  const killed: number[] = [];
  for (const [slot, objects] of await findSlotObjects()) {
    const lock = await SlotLock.take(slot);
    if (!lock) continue; // its owner lives
    try {
      // Found before the slot was taken: what its owner left is all there still.
      killed.push(...(await removeSlotObjects(objects)));
      // A dead owner may have been building more when it died than was listed before.
      const again = (await findSlotObjects()).get(slot);
      if (again) killed.push(...(await removeSlotObjects(again)));
      tags.push(slotTag(slot));
    } finally {
      await lock.release();
    }
  }
  return { tags, killed };
}
