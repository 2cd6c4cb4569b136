import { liveHeapBytes } from "@metropolis/supervisor/testing";

describe("liveHeapBytes", () => {
  it("counts what is still held, not garbage", () => {
    const before = liveHeapBytes();
    // 100,000 small objects, about 3 MB on the heap, kept...
    const held = [Array.from({ length: 100_000 }, (_, i) => ({ i, s: `object ${i}` }))];
    expect(liveHeapBytes() - before).toBeGreaterThan(2_000_000);
    // ...then let go: collected by the full collections it makes.
    held.pop();
    expect(liveHeapBytes() - before).toBeLessThan(500_000);
    // And garbage made in between is not counted either.
    for (let i = 0; i < 100_000; i++) void { i, s: `garbage ${i}` };
    expect(liveHeapBytes() - before).toBeLessThan(500_000);
  });
});
