import { supervise, type Supervisor } from "@metropolis/supervisor";
import { eventually } from "@metropolis/supervisor/testing";
import { TickClock } from "../src/tick-clock";
import { serve } from "./helpers";

describe("TickClock", () => {
  let now: jest.SpyInstance<number, []>;
  beforeEach(() => {
    let t = 1_000;
    now = jest.spyOn(Date, "now").mockImplementation(() => (t += 7));
  });
  afterEach(() => now.mockRestore());

  it("reads the wall clock once per burst of synchronous work", async () => {
    const clock = new TickClock();
    const first = [clock.now(), clock.now(), clock.now()];
    expect(first).toEqual([1_007, 1_007, 1_007]);
    expect(now).toHaveBeenCalledTimes(1);
    await Promise.resolve();
    // The reading expired with the first microtask queued after it.
    expect(clock.now()).toBe(1_014);
    expect(now).toHaveBeenCalledTimes(2);
  });
});

describe("transition times", () => {
  let sup: Supervisor | undefined;
  afterEach(async () => {
    await sup?.stop();
    sup = undefined;
  });

  it("are wall-clock times: a transition after a delay is stamped later", async () => {
    const at = new Map<string, number>();
    let release: () => void = () => undefined;
    const later = new Promise<void>((r) => (release = r));
    sup = supervise(async (ctx) => {
      ctx.run("first", serve);
      ctx.run("second", async (c) => {
        await later;
        await serve(c);
      });
      await serve(ctx);
    });
    sup.onTransition((t) => {
      if (t.to === "healthy") at.set(t.dn, t.at);
    });
    await eventually(() => at.has("root.first"), "first healthy");
    await new Promise((r) => setTimeout(r, 20));
    release();
    await eventually(() => at.has("root.second"), "second healthy");
    expect((at.get("root.second") ?? NaN) - (at.get("root.first") ?? NaN)).toBeGreaterThanOrEqual(
      15,
    );
  });
});
