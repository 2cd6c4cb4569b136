/**
 * The testbed's slots as pure functions (no root needed): the 512 slots are
 * exactly the /24s of 198.18.0.0/15, every name fits the kernel's 15
 * characters, and a name or address maps back to its slot and to nothing
 * else — what the removal of a dead owner's left-overs relies on to never
 * touch another testbed's objects, nor anything that is not a testbed's.
 */
import {
  bridgeName,
  maxHosts,
  namespaceName,
  slotCount,
  slotOfAddress,
  slotOfName,
  slotPrefix,
  vethName,
} from "../src/testbed-slot";

const slots = Array.from({ length: slotCount }, (_, s) => s);

describe("testbed slots", () => {
  it("are the 512 /24s of 198.18.0.0/15, each once", () => {
    const prefixes = slots.map(slotPrefix);
    expect(new Set(prefixes).size).toBe(512);
    expect(prefixes[0]).toBe("198.18.0");
    expect(prefixes[255]).toBe("198.18.255");
    expect(prefixes[256]).toBe("198.19.0");
    expect(prefixes[511]).toBe("198.19.255");
    for (const s of slots) {
      expect(prefixes[s]).toMatch(/^198\.1[89]\.\d{1,3}$/);
      expect(slotOfAddress(`${prefixes[s]}.0/24`)).toBe(s);
      expect(slotOfAddress(`${prefixes[s]}.254`)).toBe(s);
    }
  });

  it("map no address outside 198.18.0.0/15 to a slot", () => {
    for (const address of [
      "198.17.255.1",
      "198.20.0.1",
      "127.0.0.2",
      "10.0.0.0/24",
      "198.18.256.1",
    ]) {
      expect(slotOfAddress(address)).toBeUndefined();
    }
  });

  it("name every kernel object in at most 15 characters, and map each name back to its slot", () => {
    for (const s of slots) {
      const names = [bridgeName(s), namespaceName(s, maxHosts), vethName(s, maxHosts)];
      for (const name of names) {
        expect(name.length).toBeLessThanOrEqual(15);
        expect(slotOfName(name)).toBe(s);
      }
    }
    expect(vethName(511, 253)).toBe("mtb511v253");
  });

  it("take no name that is not a testbed's for one", () => {
    for (const name of [
      "mtb512br",
      "mtb01br",
      "mtb5",
      "mtb5x",
      "mtb5brx",
      "mtb5h",
      "eth0",
      "br0",
      "xmtb5br",
    ]) {
      expect(slotOfName(name)).toBeUndefined();
    }
  });
});
