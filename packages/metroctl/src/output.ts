/**
 * Rendering of results: a borderless table for people (cli-table3), or JSON
 * for scripts (`-o json`). Both are built from the same rows, so a script
 * sees exactly the fields a person sees.
 */
import Table from "cli-table3";
import { Option } from "commander";
import { stringify as stringifyYaml } from "yaml";
import { writeLine, type OutputStream } from "./io";

/** How a command prints its result. */
export type OutputFormat = "table" | "json";

/** How node listings (`nodes`, `approve` without ID) and `node describe` print. */
export type ListingFormat = "table" | "wide" | "json" | "yaml";

/** The `-o, --output` option of node listings: table, wide (more columns), json, yaml. */
export function listingFormatOption(): Option {
  return new Option("-o, --output <format>", "output format")
    .choices(["table", "wide", "json", "yaml"])
    .default("table");
}

/** The `-o, --output` option of listing commands. */
export function outputFormatOption(): Option {
  return new Option("-o, --output <format>", "output format")
    .choices(["table", "json"])
    .default("table");
}

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

/** Writes `value` as YAML (the same fields as JSON). */
export function writeYaml(stream: OutputStream, value: unknown): void {
  stream.write(stringifyYaml(value));
}
