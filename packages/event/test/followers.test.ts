import { Followers, MemoryValue } from "@metropolis/event";
import { eventually } from "@metropolis/supervisor/testing";

describe("Followers", () => {
  it("applies every source's values as they come, and nothing after close", async () => {
    const a = new MemoryValue(1);
    const b = new MemoryValue("x");
    const seen: string[] = [];
    const followers = new Followers();
    followers.follow(a, (v) => seen.push(`a${v}`));
    followers.follow(b, (v) => seen.push(`b${v}`));
    await eventually(() => seen.includes("a1") && seen.includes("bx"), "the current values");
    a.set(2);
    await eventually(() => seen.includes("a2"), "a's next value");
    await followers.close();
    const before = seen.length;
    a.set(3);
    b.set("y");
    await new Promise((r) => setImmediate(r));
    expect(seen).toHaveLength(before);
  });

  it("reports a failure of an apply when closed", async () => {
    const a = new MemoryValue(1);
    const followers = new Followers();
    followers.follow(a, () => {
      throw new Error("apply failed");
    });
    await expect(followers.close()).rejects.toThrow("apply failed");
  });
});
