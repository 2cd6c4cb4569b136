/**
 * The timeline of a chaos run as one SVG (no dependencies): time in seconds
 * along x; the run's phases shaded; one band per fault (kind and node, or
 * its own label, from its start to its end) stacked in lanes so that
 * overlapping faults stay readable, in one block per category — processes
 * (kill, freeze, …), the network (partitions, isolations, a blocked port,
 * packet loss), clocks (jumps, strobes) and membership (consensus role
 * changes); availability as bars of successful operations per second;
 * leader changes as dashed markers named by the new leader; the moments two
 * curators acted as the leader at once (leader-check.ts) as red bands; the
 * last fault and the moment all nodes were healthy again as labelled lines.
 *
 * It guarantees a well-formed, self-contained SVG 1200 wide whatever the
 * input (empty lists, faults still open, times outside the run), with every
 * text escaped; 400 high with the process block alone, each further
 * block adding its lanes (at most 4 each).
 */

/** Which block of lanes a fault is drawn in. */
export type TimelineCategory = "process" | "network" | "clock" | "membership";

/** A fault the nemesis injected, in seconds since the run started. */
export interface TimelineFault {
  /** What it was, e.g. "kill", "pause", "partition". */
  kind: string;
  /** The node it hit. */
  node: string;
  /** Its block (default "process"). */
  category?: TimelineCategory;
  /** The band's text (default: kind and node), e.g. "partition [1,2] | [3,4,5]". */
  label?: string;
  start: number;
  /** When it was healed; `undefined` while it was still active at the end. */
  end?: number;
}

/** A new curator leader, in seconds since the run started. */
export interface TimelineLeaderChange {
  at: number;
  leader: string;
}

/** A phase of the run (e.g. A: faults, B: recovery), in seconds. */
export interface TimelinePhase {
  name: string;
  start: number;
  end: number;
}

/** Everything the timeline shows. Times are seconds since the run started. */
export interface TimelineInput {
  /** A title above the chart. */
  title?: string;
  faults: TimelineFault[];
  /** Successful operations in each second: index i is the second [i, i + 1). */
  okPerSecond: number[];
  leaderChanges: TimelineLeaderChange[];
  phases: TimelinePhase[];
  /** When the last fault was healed, if any. */
  lastFaultAt?: number;
  /** When every node was healthy again, if it happened. */
  allHealthyAt?: number;
  /** Stretches of time in which two curators acted as the leader (leader-check.ts). */
  twoLeaders?: Array<{ from: number; to: number }>;
}

const width = 1200;
const height = 400;
const left = 70;
const right = 20;
const top = 44;
const laneHeight = 20;
const bottom = 40;
const phaseColours = ["#e8f0fe", "#e6f4ea", "#fef7e0", "#fce8e6"];
const faultColours: Record<string, string> = {
  kill: "#d93025",
  "kill-leader": "#a50e0e",
  "kill-etcd": "#ee675c",
  "majority-kill": "#7b0c06",
  term: "#e8710a",
  pause: "#f29900",
  freeze: "#f29900",
  partition: "#9334e6",
  split: "#9334e6",
  ring: "#7627bb",
  bridge: "#a142f4",
  isolate: "#b31412",
  "isolate-leader": "#b31412",
  "isolate-raft-leader": "#c5221f",
  "block-port": "#1967d2",
  loss: "#e37400",
  "clock-jump": "#00897b",
  "clock-strobe": "#00695c",
  "member-change": "#5f6368",
};
const categories: readonly TimelineCategory[] = ["process", "network", "clock", "membership"];
const categoryNames: Record<TimelineCategory, string> = {
  process: "faults",
  network: "network",
  clock: "clocks",
  membership: "members",
};
/** Lanes of the process block (as before categories existed), and of every other block. */
const processLanes = 6;
const otherLanes = 4;

/** A white outline that keeps a label legible over bars and lines. */
const halo = ' stroke="#fff" stroke-width="3" paint-order="stroke"';

/** Escapes text for SVG content and attributes. */
function escape(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}

/** A number for an SVG attribute. */
function n(value: number): string {
  return Number.isFinite(value) ? String(Math.round(value * 10) / 10) : "0";
}

/** A tick step of 1, 2 or 5 × 10^k giving at most `max` ticks over `span`. */
function tickStep(span: number, max: number): number {
  const raw = Math.max(span / max, 1e-9);
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw) return m * power;
  return 10 * power;
}

/**
 * Assigns each fault the first lane free at its start; a lane is taken
 * until `until(fault)` (its end, or the end of a label drawn after it).
 */
function lanes(
  faults: readonly TimelineFault[],
  until: (fault: TimelineFault) => number,
): number[] {
  const laneEnds: number[] = [];
  return faults.map((fault) => {
    let lane = laneEnds.findIndex((laneEnd) => laneEnd <= fault.start);
    if (lane === -1) lane = laneEnds.length;
    laneEnds[lane] = until(fault);
    return lane;
  });
}

/** About how wide `text` is drawn, in pixels (12 px sans-serif). */
const textWidth = (text: string): number => text.length * 7 + 6;

/** A fault's band text. */
const labelOf = (fault: TimelineFault): string => fault.label ?? `${fault.kind} ${fault.node}`;

/**
 * Renders the timeline of a run as an SVG document of about 1200×400.
 *
 * @returns the SVG's text, starting with `<svg`.
 */
export function renderTimeline(input: TimelineInput): string {
  const ends = [
    input.okPerSecond.length,
    input.lastFaultAt ?? 0,
    input.allHealthyAt ?? 0,
    ...input.phases.map((p) => p.end),
    ...input.faults.map((f) => f.end ?? f.start),
    ...input.leaderChanges.map((c) => c.at),
  ].filter((t) => Number.isFinite(t));
  const span = Math.max(1, ...ends);
  const plotWidth = width - left - right;
  const x = (t: number): number => left + (Math.min(Math.max(t, 0), span) / span) * plotWidth;

  // One block of lanes per category that has faults (the process block always).
  const secondsPerPixel = span / plotWidth;
  /** Until when a fault's band and its label take their lane. */
  const until = (fault: TimelineFault): number => {
    const end = fault.end ?? span;
    const width = (end - fault.start) / secondsPerPixel;
    const label = textWidth(labelOf(fault));
    return label <= width ? end : end + (label + 6) * secondsPerPixel;
  };
  const blocks = categories
    .map((category) => {
      const faults = input.faults.filter((f) => (f.category ?? "process") === category);
      const faultLanes = lanes(faults, until);
      const max = category === "process" ? processLanes : otherLanes;
      const count = Math.min(Math.max(1, ...faultLanes.map((l) => l + 1)), max);
      return { category, faults, faultLanes, count };
    })
    .filter((b) => b.category === "process" || b.faults.length > 0);
  const extraLanes = blocks
    .filter((b) => b.category !== "process")
    .reduce((sum, b) => sum + b.count, 0);
  // The chart as before with the process block alone; every other block adds its lanes.
  const chartHeight = height + extraLanes * laneHeight + (blocks.length - 1) * 4;
  const faultsBottom =
    top + blocks.reduce((sum, b) => sum + b.count, 0) * laneHeight + (blocks.length - 1) * 4;
  // A strip for the leader changes' names, in two rows, above the bars.
  const leadersTop = faultsBottom + 4;
  const barsTop = leadersTop + 2 * 14 + 8;
  const barsBottom = chartHeight - bottom;
  const maxOk = Math.max(1, ...input.okPerSecond.filter((v) => Number.isFinite(v)));
  const yStep = tickStep(maxOk, 4);
  const yMax = Math.ceil(maxOk / yStep) * yStep;
  const y = (v: number): number => barsBottom - (Math.max(v, 0) / yMax) * (barsBottom - barsTop);

  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${chartHeight}" viewBox="0 0 ${width} ${chartHeight}" font-family="sans-serif" font-size="12">`,
    `<rect x="0" y="0" width="${width}" height="${chartHeight}" fill="#ffffff"/>`,
  );
  if (input.title !== undefined) {
    out.push(
      `<text x="${left}" y="20" font-size="15" font-weight="bold">${escape(input.title)}</text>`,
    );
  }

  // Phases, shaded behind everything.
  input.phases.forEach((phase, i) => {
    const x0 = x(phase.start);
    const x1 = x(phase.end);
    out.push(
      `<rect x="${n(x0)}" y="${top - 12}" width="${n(Math.max(x1 - x0, 0))}" height="${n(barsBottom - top + 12)}" fill="${phaseColours[i % phaseColours.length]}"/>`,
      `<text x="${n(x0 + 4)}" y="${top - 2}" fill="#444">${escape(`phase ${phase.name}`)}</text>`,
    );
  });

  // Two leaders at once: red bands behind the faults and bars.
  for (const w of input.twoLeaders ?? []) {
    const x0 = x(w.from);
    const x1 = Math.max(x(w.to), x0 + 3);
    out.push(
      `<rect x="${n(x0)}" y="${top - 12}" width="${n(x1 - x0)}" height="${n(barsBottom - top + 12)}" fill="#ea4335" fill-opacity="0.35"><title>${escape(`two leaders: ${w.from.toFixed(1)}–${w.to.toFixed(1)} s`)}</title></rect>`,
    );
  }

  // Faults, one band each, block by block.
  let blockTop = top;
  for (const block of blocks) {
    if (block.category !== "process") {
      out.push(
        `<line x1="${left}" x2="${width - right}" y1="${n(blockTop - 2)}" y2="${n(blockTop - 2)}" stroke="#dadce0"/>`,
      );
    }
    // Faults past the last lane first, so that the labels of that lane are drawn over them.
    const order = block.faults
      .map((_, i) => i)
      .sort(
        (a, b) =>
          Number(block.faultLanes[b] >= block.count) - Number(block.faultLanes[a] >= block.count),
      );
    order.forEach((i) => {
      const fault = block.faults[i];
      // Past the block's last lane a fault shares that lane, drawn without its label (its
      // tooltip still names it): a label there would cover another's.
      const overflow = block.faultLanes[i] >= block.count;
      const lane = Math.min(block.faultLanes[i], block.count - 1);
      const x0 = x(fault.start);
      const x1 = Math.max(x(fault.end ?? span), x0 + 2);
      const yTop = blockTop + lane * laneHeight + 2;
      const colour = faultColours[fault.kind] ?? "#5f6368";
      const label = labelOf(fault);
      out.push(
        `<rect x="${n(x0)}" y="${n(yTop)}" width="${n(x1 - x0)}" height="${laneHeight - 4}" rx="3" fill="${colour}" fill-opacity="0.8"><title>${escape(`${label}: ${fault.start.toFixed(1)}–${fault.end === undefined ? "end" : fault.end.toFixed(1)} s`)}</title></rect>`,
      );
      if (overflow) return;
      out.push(
        // Inside the band when it fits (about 7 px a character), else just after it.
        textWidth(label) <= x1 - x0
          ? `<text x="${n(x0 + 3)}" y="${n(yTop + laneHeight - 8)}" fill="#fff" font-weight="bold">${escape(label)}</text>`
          : `<text x="${n(x1 + 3)}" y="${n(yTop + laneHeight - 8)}" fill="#000"${halo}>${escape(label)}</text>`,
      );
    });
    out.push(
      `<text x="8" y="${n(blockTop + 14)}" fill="#444">${categoryNames[block.category]}</text>`,
    );
    blockTop += block.count * laneHeight + 4;
  }

  // Availability: successful operations per second.
  out.push(`<text x="8" y="${n(barsTop - 6)}" fill="#444">ok ops/s</text>`);
  for (let v = 0; v <= yMax; v += yStep) {
    out.push(
      `<line x1="${left}" x2="${width - right}" y1="${n(y(v))}" y2="${n(y(v))}" stroke="#dadce0"/>`,
      `<text x="${left - 6}" y="${n(y(v) + 4)}" text-anchor="end" fill="#444">${v}</text>`,
    );
  }
  const barWidth = plotWidth / span;
  input.okPerSecond.forEach((v, second) => {
    if (!Number.isFinite(v) || v <= 0 || second >= span) return;
    out.push(
      `<rect x="${n(x(second) + barWidth * 0.1)}" y="${n(y(v))}" width="${n(Math.max(barWidth * 0.8, 1))}" height="${n(barsBottom - y(v))}" fill="#1a73e8"/>`,
    );
  });

  // Leader changes: a dashed line each; its name in the first of two rows where it does not
  // run into the previous name (none when both rows are taken there).
  const rowEnds = [-Infinity, -Infinity];
  input.leaderChanges.forEach((change) => {
    const at = x(change.at);
    const text = `leader ${change.leader}`;
    const row = rowEnds.findIndex((end) => end <= at);
    const labelY = leadersTop + 11 + Math.max(row, 0) * 14;
    out.push(
      `<line x1="${n(at)}" x2="${n(at)}" y1="${n(labelY - 10)}" y2="${n(barsBottom)}" stroke="#188038" stroke-width="1.5" stroke-dasharray="4 3"><title>${escape(`${text} at ${change.at.toFixed(1)} s`)}</title></line>`,
    );
    if (row === -1) return;
    rowEnds[row] = at + textWidth(text);
    out.push(
      `<text x="${n(at + 3)}" y="${n(labelY)}" fill="#188038"${halo}>${escape(text)}</text>`,
    );
  });

  // The last fault and all-healthy moments.
  const moment = (t: number | undefined, label: string, colour: string, row: number): void => {
    if (t === undefined || !Number.isFinite(t)) return;
    const at = x(t);
    const anchor = at > width - 200 ? "end" : "start";
    const dx = anchor === "end" ? -4 : 4;
    out.push(
      `<line x1="${n(at)}" x2="${n(at)}" y1="${top - 12}" y2="${barsBottom}" stroke="${colour}" stroke-width="2"/>`,
      `<text x="${n(at + dx)}" y="${n(barsBottom - 8 - row * 14)}" text-anchor="${anchor}" fill="${colour}" font-weight="bold"${halo}>${escape(`${label} ${t.toFixed(1)} s`)}</text>`,
    );
  };
  moment(input.lastFaultAt, "last fault", "#b31412", 1);
  moment(input.allHealthyAt, "all healthy", "#0d652d", 0);

  // The time axis.
  out.push(
    `<line x1="${left}" x2="${width - right}" y1="${barsBottom}" y2="${barsBottom}" stroke="#000"/>`,
  );
  const xStep = tickStep(span, 20);
  for (let t = 0; t <= span + 1e-9; t += xStep) {
    out.push(
      `<line x1="${n(x(t))}" x2="${n(x(t))}" y1="${barsBottom}" y2="${barsBottom + 5}" stroke="#000"/>`,
      `<text x="${n(x(t))}" y="${barsBottom + 18}" text-anchor="middle">${Number(t.toFixed(3))}</text>`,
    );
  }
  out.push(
    `<text x="${left + plotWidth / 2}" y="${chartHeight - 6}" text-anchor="middle" fill="#444">time (s)</text>`,
    "</svg>",
  );
  return out.join("\n") + "\n";
}
