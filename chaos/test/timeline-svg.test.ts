/**
 * The run's timeline as SVG: a sample run renders every element (phases,
 * fault bands, availability bars, leader changes, last-fault and all-healthy
 * lines) with its text escaped; empty input still makes a valid document. The
 * sample is written to the temporary directory for a look.
 */
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { renderTimeline, type TimelineInput } from "../src/timeline-svg";

const sample: TimelineInput = {
  title: "chaos run <sample> & co",
  phases: [
    { name: "A", start: 0, end: 60 },
    { name: "B", start: 60, end: 90 },
  ],
  faults: [
    { kind: "kill", node: "node1", start: 5, end: 15 },
    { kind: "pause", node: "node2", start: 10, end: 22 },
    { kind: "partition", node: "node3", start: 30, end: 45 },
    { kind: "kill", node: "node2", start: 50, end: 58 },
  ],
  okPerSecond: Array.from({ length: 90 }, (_, s) =>
    (s >= 6 && s < 9) || (s >= 31 && s < 34) ? 0 : 40 + ((s * 7) % 13),
  ),
  leaderChanges: [
    { at: 0.5, leader: "node1" },
    { at: 8, leader: "node2" },
    { at: 33, leader: "node1" },
  ],
  lastFaultAt: 58,
  allHealthyAt: 63.5,
};

describe("renderTimeline", () => {
  it("draws every element of a run, text escaped", () => {
    const svg = renderTimeline(sample);
    writeFileSync(join(tmpdir(), "chaos-timeline-sample.svg"), svg);
    expect(svg.startsWith("<svg ")).toBe(true);
    expect(svg.trimEnd().endsWith("</svg>")).toBe(true);
    expect(svg).toContain('width="1200" height="400"');
    expect(svg).toContain("chaos run &lt;sample&gt; &amp; co");
    for (const text of ["phase A", "phase B", "kill node1", "pause node2", "partition node3"]) {
      expect(svg).toContain(`>${text}</text>`);
    }
    expect(svg).toContain(">leader node2</text>");
    expect(svg).toContain(">last fault 58.0 s</text>");
    expect(svg).toContain(">all healthy 63.5 s</text>");
    // One bar per second with successful operations.
    expect(svg.match(/fill="#1a73e8"/g)?.length).toBe(84);
    expect(svg).not.toMatch(/NaN|Infinity|undefined/);
  });

  it("renders an empty run and an open fault", () => {
    const empty = renderTimeline({ faults: [], okPerSecond: [], leaderChanges: [], phases: [] });
    expect(empty).toContain("</svg>");
    const open = renderTimeline({
      faults: [{ kind: "kill", node: "node1", start: 2 }],
      okPerSecond: [1, 2, 3],
      leaderChanges: [],
      phases: [],
    });
    expect(open).toContain(">kill node1</text>");
    expect(open).not.toMatch(/NaN|Infinity|undefined/);
  });

  it("draws network, clock and membership faults in blocks of their own, and two-leader moments", () => {
    const svg = renderTimeline({
      ...sample,
      faults: [
        ...sample.faults,
        {
          kind: "split",
          node: "network",
          category: "network",
          label: "split [1] | [2,3]",
          start: 20,
          end: 30,
        },
        {
          kind: "ring",
          node: "network",
          category: "network",
          label: "ring 1-2-3-4-5",
          start: 45,
          end: 50,
        },
        {
          kind: "clock-jump",
          node: "node2",
          category: "clock",
          label: "clock +60 s node2",
          start: 5,
          end: 25,
        },
        { kind: "member-change", node: "node6", category: "membership", start: 60, end: 80 },
      ],
      twoLeaders: [{ from: 33, to: 34 }],
    });
    // The process block as before, plus one lane (20) and a gap (4) each for network, clocks, members.
    expect(svg).toContain('width="1200" height="472"');
    for (const text of ["network", "clocks", "members", "split [1] | [2,3]", "ring 1-2-3-4-5"]) {
      expect(svg).toContain(`>${text}</text>`);
    }
    expect(svg).toContain(">clock +60 s node2</text>");
    expect(svg).toContain(">member-change node6</text>");
    expect(svg).toContain("<title>two leaders: 33.0–34.0 s</title>");
    expect(svg).not.toMatch(/NaN|Infinity|undefined/);
    writeFileSync(join(tmpdir(), "chaos-timeline-sample-network.svg"), svg);
  });
});
