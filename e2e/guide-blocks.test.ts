/**
 * The README guides' marked blocks, checked without a cluster (and without
 * root, where guide.test.ts and operating-guide.test.ts, which run them, are
 * skipped): they parse, in the places those tests expect, and every
 * `metroctl` and `metropolis-node` command line in them names a command that
 * exists, with flags that command's `--help` lists. A renamed command or flag
 * fails here on any machine.
 */
import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { runMetroctl } from "@metropolis/metroctl";
import { installServiceHelp, nodeHelp } from "../packages/node/src/node-usage";
import {
  describePlace,
  guideBlocks,
  GuideFormatError,
  substituteAddresses,
  type GuideBlock,
} from "./guide-blocks";

const readme = join(resolve(__dirname, ".."), "README.md");

/** A shell command line's words, quotes removed (no expansion); enough for the guide's lines. */
function words(line: string): string[] {
  const out: string[] = [];
  const pattern = /'([^']*)'|"([^"]*)"|([^\s'"]+)/g;
  for (const m of line.matchAll(pattern)) out.push(m[1] ?? m[2] ?? m[3]);
  return out;
}

/**
 * Every invocation of `program` in `script` (where a command starts: a
 * line's start, after `$(`, `&&`, `;` or `|`): its words after the name, to
 * a pipe or `)`.
 */
function invocations(script: string, program: string): string[][] {
  const found: string[][] = [];
  const pattern = new RegExp(
    `(?:^|\\$\\(|&&|;|\\|)[ \\t]*${program}((?:[ \\t]+(?:'[^']*'|"[^"]*"|[^\\s|)'"]+))*)`,
    "gm",
  );
  for (const m of script.matchAll(pattern)) found.push(words(m[1]));
  return found;
}

/** metroctl's flags that come before the command, each with a value. */
const globalFlags = new Set(["--endpoints", "--config", "--dial-timeout"]);

/** What `metroctl args…` prints on stdout, and its exit status. */
async function metroctl(args: string[]): Promise<{ code: number; stdout: string }> {
  let stdout = "";
  const code = await runMetroctl(args, {
    stdout: { write: (s: string) => ((stdout += s), true) },
    stderr: { write: () => true },
  });
  return { code, stdout };
}

let blocks: GuideBlock[];
beforeAll(async () => {
  blocks = guideBlocks(await readFile(readme, "utf8"));
});

it("are where guide.test.ts runs them", () => {
  expect(blocks.map((b) => describePlace(b.place))).toEqual([
    "operator",
    "machine 1",
    "operator",
    "operator",
    "machines 2 3",
    "operator",
    "operator",
    "operator",
    "operator",
    "operator",
    "machine 3",
    "operator",
  ]);
});

/**
 * Checks that every metroctl command line of `lines` names a command that
 * exists (its words up to the first that is not a further subcommand, e.g.
 * an argument) with flags its `--help` lists.
 */
async function checkMetroctlLines(lines: string[][]): Promise<void> {
  const globalHelp = (await metroctl(["--help"])).stdout;
  for (const line of lines) {
    let rest = [...line];
    while (rest.length > 0 && globalFlags.has(rest[0])) {
      expect([line, globalHelp.includes(rest[0])]).toEqual([line, true]);
      rest = rest.slice(2);
    }
    const path: string[] = [];
    let help = await metroctl(["--help"]);
    while (rest.length > 0 && /^[a-z][a-z-]*$/.test(rest[0])) {
      const deeper = await metroctl([...path, rest[0], "--help"]);
      // An argument (`access revoke alice`) is no subcommand: the usage stays the command's.
      if (
        path.length > 0 &&
        !deeper.stdout.startsWith(`Usage: metroctl ${[...path, rest[0]].join(" ")} `)
      ) {
        break;
      }
      path.push(rest[0]);
      rest = rest.slice(1);
      help = deeper;
    }
    expect([line, help.code, help.stdout.split("\n")[0]]).toEqual([
      line,
      0,
      expect.stringContaining(`Usage: metroctl ${path.join(" ")} `),
    ]);
    for (const flag of rest.filter((w) => w.startsWith("-"))) {
      expect([line, flag, help.stdout.includes(flag)]).toEqual([line, flag, true]);
    }
  }
}

it("use metroctl commands and flags that exist", async () => {
  const lines = blocks
    .filter((b) => b.place.kind === "operator")
    .flatMap((b) => invocations(b.script, "metroctl"));
  expect(lines.length).toBe(23);
  await checkMetroctlLines(lines);
});

it("use metropolis-node's install-service with its flags", () => {
  const lines = blocks
    .filter((b) => b.place.kind === "machines")
    .flatMap((b) => invocations(b.script, "metropolis-node"));
  expect(lines.length).toBe(2);
  for (const line of lines) {
    expect(line[0]).toBe("install-service");
    for (const flag of line.filter((w) => w.startsWith("-"))) {
      expect([flag, installServiceHelp.includes(flag)]).toEqual([flag, true]);
    }
  }
});

it("refuses a marker without a block, and an address of no machine", () => {
  expect(() => guideBlocks("<!-- guide: operator -->\ntext\n")).toThrow(GuideFormatError);
  expect(() => guideBlocks("<!-- guide: somewhere -->\n```sh\nx\n```\n")).toThrow(GuideFormatError);
  expect(() => guideBlocks("<!-- guide: machine 1 -->\n```sh\nx\n")).toThrow(GuideFormatError);
  const address = (n: number) => {
    if (n > 3) throw new Error(`no host ${n}`);
    return `198.18.7.${n + 1}`;
  };
  expect(substituteAddresses("ssh 10.0.0.1 10.0.0.30", (n) => (n === 1 ? "a" : "b"))).toBe(
    "ssh a b",
  );
  expect(() => substituteAddresses("10.0.0.4", address)).toThrow(GuideFormatError);
});

describe("the operating section", () => {
  let operating: GuideBlock[];
  beforeAll(async () => {
    operating = guideBlocks(await readFile(readme, "utf8"), "operating");
  });

  it("is where operating-guide.test.ts runs it, apart from the guide's blocks", () => {
    expect(operating.map((b) => describePlace(b.place))).toEqual([
      ...Array<string>(9).fill("operator"),
      "machine 4",
      "operator",
    ]);
    expect(operating.every((b) => blocks.every((g) => g.line !== b.line))).toBe(true);
  });

  it("uses metroctl commands and flags that exist", async () => {
    const lines = operating
      .filter((b) => b.place.kind === "operator")
      .flatMap((b) => invocations(b.script, "metroctl"));
    expect(lines.length).toBe(24);
    await checkMetroctlLines(lines);
  });

  it("restores with metropolis-node's own flags", () => {
    const lines = operating
      .filter((b) => b.place.kind === "machines")
      .flatMap((b) => invocations(b.script, "metropolis-node"));
    expect(lines).toHaveLength(1);
    for (const flag of lines[0].filter((w) => w.startsWith("-"))) {
      expect([flag, nodeHelp.includes(`${flag} `)]).toEqual([flag, true]);
    }
    expect(lines[0]).toEqual(expect.arrayContaining(["--recover-from", "--owner-key"]));
  });

  it("refuses a marker of its own that is not one", () => {
    expect(() => guideBlocks("<!-- operating: nowhere -->\n```sh\nx\n```\n", "operating")).toThrow(
      GuideFormatError,
    );
    // The guide's markers are not the section's, nor the other way round.
    expect(guideBlocks("<!-- guide: operator -->\n```sh\nx\n```\n", "operating")).toEqual([]);
    expect(guideBlocks("<!-- operating: operator -->\n```sh\nx\n```\n")).toEqual([]);
  });
});
