/**
 * The `-o, --output` options and the formats they name, apart from the
 * renderers in `output.ts` (cli-table3, YAML): the command table adds these
 * options to every command without loading a renderer.
 */
import { Option } from "commander";

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
