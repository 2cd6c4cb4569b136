import { withoutStackTrace } from "@metropolis/supervisor";

describe("withoutStackTrace", () => {
  test("errors made in it have no frames; errors made after it have them again", () => {
    const bare = withoutStackTrace(() => new TypeError("stream ended"));
    expect(bare.stack).toBe("TypeError: stream ended");
    expect(new Error("later").stack?.split("\n").length).toBeGreaterThan(1);
  });

  test("the limit is restored when make throws", () => {
    const limit = Error.stackTraceLimit;
    expect(() =>
      withoutStackTrace(() => {
        throw new Error("failed to make");
      }),
    ).toThrow("failed to make");
    expect(Error.stackTraceLimit).toBe(limit);
  });
});
