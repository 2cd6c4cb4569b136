/**
 * Rendering of results: a borderless table for people (cli-table3), or JSON
 * for scripts (`-o json`). Both are built from the same rows, so a script
 * sees exactly the fields a person sees.
 */
import Table from "cli-table3";
import { writeLine, type OutputStream } from "./io";

export {
  listingFormatOption,
  outputFormatOption,
  type ListingFormat,
  type OutputFormat,
} from "./output-formats";

/** A column of a table: its heading and how to show a row's value. */
export interface Column<Row> {
  heading: string;
  cell: (row: Row) => string;
}

const noBorders = {
  top: "",
  "top-mid": "",
  "top-left": "",
  "top-right": "",
  bottom: "",
  "bottom-mid": "",
  "bottom-left": "",
  "bottom-right": "",
  left: "",
  "left-mid": "",
  mid: "",
  "mid-mid": "",
  right: "",
  "right-mid": "",
  middle: "  ",
};

/** Renders rows as a plain, aligned table with a heading line (no colours, no borders). */
export function renderTable<Row>(columns: readonly Column<Row>[], rows: readonly Row[]): string {
  const table = new Table({
    head: columns.map((c) => c.heading),
    chars: noBorders,
    // No ANSI colours: output is often piped, and tests compare text.
    style: { head: [], border: [], "padding-left": 0, "padding-right": 0 },
  });
  for (const row of rows) table.push(columns.map((c) => c.cell(row)));
  return table
    .toString()
    .split("\n")
    .map((line) => line.trimEnd())
    .join("\n");
}

/** Writes `value` as indented JSON. */
export function writeJson(stream: OutputStream, value: unknown): void {
  writeLine(stream, JSON.stringify(value, null, 2));
}

/**
 * Writes `value` as YAML (the same fields as JSON). The YAML library is
 * loaded here, on the first use, not by every command that can print YAML.
 */
export async function writeYaml(stream: OutputStream, value: unknown): Promise<void> {
  const { stringify } = await import("yaml");
  stream.write(stringify(value));
}
