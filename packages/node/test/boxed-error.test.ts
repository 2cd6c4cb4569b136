import { causeChain, fatalWidth, formatFatal } from "../src/boxed-error";

class EnrolmentError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "EnrolmentError";
  }
}

/** The text inside the box, borders and padding stripped, trailing spaces trimmed. */
function inside(box: string): string[] {
  return box
    .split("\n")
    .slice(3, -1)
    .map((l) => l.slice(2, -2).trimEnd());
}

describe("formatFatal", () => {
  it("boxes the headline, the title and the cause chain, every line exactly 78 columns", () => {
    const root = new Error("connect ECONNREFUSED 10.0.0.1:7835");
    const middle = new Error("no curator reachable", { cause: root });
    const cause = new EnrolmentError("registering failed", { cause: middle });
    const box = formatFatal("Registering with the cluster failed.", cause);
    const lines = box.split("\n");
    for (const line of lines) expect(Array.from(line)).toHaveLength(fatalWidth);
    expect(lines[0]).toBe(`┌${"─".repeat(fatalWidth - 2)}┐`);
    expect(lines[1]).toMatch(/^│ metropolis-node cannot start +│$/);
    expect(lines[2]).toBe(`├${"─".repeat(fatalWidth - 2)}┤`);
    expect(lines[lines.length - 1]).toBe(`└${"─".repeat(fatalWidth - 2)}┘`);
    expect(inside(box)).toEqual([
      "Registering with the cluster failed.",
      "",
      "EnrolmentError: registering failed",
      "caused by: no curator reachable",
      "caused by: connect ECONNREFUSED 10.0.0.1:7835",
    ]);
  });

  it("wraps long text at word boundaries, breaks overlong words, and keeps every word", () => {
    const words = Array.from({ length: 40 }, (_, i) => `word${i}`);
    const long = "x".repeat(200);
    const box = formatFatal(words.join(" "), new Error(`path ${long} is missing`));
    for (const line of box.split("\n")) expect(Array.from(line)).toHaveLength(fatalWidth);
    const text = inside(box);
    // Word-wrapped: no word is split, and lines are filled before wrapping.
    const titleLines = text.slice(0, text.indexOf(""));
    expect(titleLines.length).toBeGreaterThan(1);
    expect(titleLines.join(" ").split(" ")).toEqual(words);
    for (const l of titleLines.slice(0, -1)) expect(l.length).toBeGreaterThan(fatalWidth - 4 - 8);
    // The overlong word is broken across lines, and nothing is lost.
    const causeText = text.slice(text.indexOf("") + 1).join("");
    expect(causeText.replace(/ /g, "")).toBe(`path${long}ismissing`);
  });

  it("keeps the lines of a multi-line message and takes non-Error causes as they are", () => {
    const box = formatFatal(
      "Cannot read the sealed configuration.\nThe ESP may be corrupt.",
      "EIO",
    );
    expect(inside(box)).toEqual([
      "Cannot read the sealed configuration.",
      "The ESP may be corrupt.",
      "",
      "EIO",
    ]);
    expect(inside(formatFatal("Nothing known.", undefined))).toEqual(["Nothing known."]);
  });

  it("stops at a cycle in the cause chain", () => {
    const a = new Error("a");
    const b = new Error("b", { cause: a });
    (a as { cause?: unknown }).cause = b;
    expect(causeChain(b)).toEqual(["b", "a"]);
    expect(inside(formatFatal("Loop.", b))).toEqual(["Loop.", "", "b", "caused by: a"]);
  });
});
