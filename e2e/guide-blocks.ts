/**
 * The command blocks of the root README's guides, as the tests that run them
 * read them: "Running a cluster on several machines" (marker `guide`,
 * `guide.test.ts`) and "Operating a cluster" (marker `operating`,
 * `operating-guide.test.ts`). A block is a fenced `sh` block right after a
 * marker line that says where it runs:
 *
 *   <!-- guide: operator -->      on the operator's machine (metroctl)
 *   <!-- guide: machine 1 -->     on machine 1, as root
 *   <!-- guide: machine 2 3 -->   on machines 2 and 3: written for the first
 *                                 (its address), run on each with its own
 *
 * (`<!-- operating: … -->` the same way for the other guide.) The guides name
 * machine N by the address `10.0.0.N`; {@link substituteAddresses} puts a
 * testbed's addresses in their place.
 */

/** Where a block of the guide runs. */
export type GuidePlace =
  | { readonly kind: "operator" }
  | { readonly kind: "machines"; readonly machines: readonly number[] };

/** One marked block of the guide. */
export interface GuideBlock {
  readonly place: GuidePlace;
  /** The block's lines, as written. */
  readonly script: string;
  /** The line number (1-based) of its marker in the README. */
  readonly line: number;
}

/** The README's guide is not marked up as this module reads it. */
export class GuideFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GuideFormatError";
  }
}

/** The guides' markers: `guide` for the cluster on several machines, `operating` for its care. */
export type GuideMarker = "guide" | "operating";

/**
 * The blocks of `markdown` marked `<!-- MARKER: … -->` (by default the
 * guide's, `<!-- guide: … -->`), in order; blocks of other markers are not
 * read.
 *
 * @throws GuideFormatError for a marker not followed by a ```sh block, a
 *   block never closed, or a marker of another form (`<!-- MARKER:` anything
 *   else).
 */
export function guideBlocks(markdown: string, marker: GuideMarker = "guide"): GuideBlock[] {
  const markerPattern = new RegExp(
    `^<!-- ${marker}: (operator|machines? ([0-9]+(?: [0-9]+)*)) -->$`,
  );
  const lines = markdown.split("\n");
  const blocks: GuideBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i].startsWith(`<!-- ${marker}:`)) continue;
    const found = markerPattern.exec(lines[i]);
    if (!found) throw new GuideFormatError(`line ${i + 1}: not a ${marker} marker: ${lines[i]}`);
    if (lines[i + 1] !== "```sh") {
      throw new GuideFormatError(`line ${i + 2}: a ${marker} marker must be followed by \`\`\`sh`);
    }
    const end = lines.indexOf("```", i + 2);
    if (end < 0) throw new GuideFormatError(`line ${i + 2}: the block is never closed`);
    const place: GuidePlace =
      found[2] === undefined
        ? { kind: "operator" }
        : { kind: "machines", machines: found[2].split(" ").map(Number) };
    blocks.push({ place, script: lines.slice(i + 2, end).join("\n") + "\n", line: i + 1 });
    i = end;
  }
  return blocks;
}

/** Where a block runs, in words: `operator`, `machine 1`, `machines 2 3`. */
export function describePlace(place: GuidePlace): string {
  return place.kind === "operator"
    ? "operator"
    : `machine${place.machines.length > 1 ? "s" : ""} ${place.machines.join(" ")}`;
}

/**
 * `script` with each guide address `10.0.0.N` replaced by `address(N)`.
 *
 * @throws GuideFormatError when `address` throws for an N (no such machine).
 */
export function substituteAddresses(script: string, address: (machine: number) => string): string {
  return script.replace(/\b10\.0\.0\.([0-9]{1,3})\b/g, (_, n: string) => {
    try {
      return address(Number(n));
    } catch (e) {
      throw new GuideFormatError(
        `10.0.0.${n}: no such machine (${e instanceof Error ? e.message : String(e)})`,
      );
    }
  });
}
