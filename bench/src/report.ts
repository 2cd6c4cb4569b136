/** Reporting shared by the benchmarks: statistics, a table on stdout, JSON under reports/. */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";

export interface Row {
  measure: string;
  value: number;
  unit: string;
  /** The target, as text, where there is one. */
  target?: string;
  met?: boolean;
}

export function median(xs: readonly number[]): number {
  return percentile(xs, 50);
}

/** Nearest-rank percentile. */
export function percentile(xs: readonly number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

const format = (v: number) =>
  Math.abs(v) >= 1000 ? Math.round(v).toLocaleString("en-US") : v.toPrecision(3);

export function printTable(
  name: string,
  rows: readonly Row[],
  log: (line: string) => void = console.log,
): void {
  const lines = rows.map((r) => [
    r.measure,
    `${format(r.value)} ${r.unit}`,
    r.target ?? "",
    r.met === undefined ? "" : r.met ? "met" : "MISSED",
  ]);
  const header = ["measure", "value", "target", ""];
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const show = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]))
      .join("  ")
      .trimEnd();
  log(`\n${name} benchmark (node ${process.version}, ${new Date().toISOString()})`);
  log(show(header));
  log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const l of lines) log(show(l));
}

/** Writes the rows to reports/<file> at the repository root. */
export async function writeReport(
  file: string,
  rows: readonly Row[],
  log: (line: string) => void = console.log,
  extra: Record<string, unknown> = {},
): Promise<void> {
  const dir = join(__dirname, "..", "..", "reports");
  await mkdir(dir, { recursive: true });
  const path = join(dir, file);
  await writeFile(
    path,
    JSON.stringify(
      { node: process.version, at: new Date().toISOString(), rows, ...extra },
      null,
      2,
    ) + "\n",
  );
  log(`\nwritten to ${path}`);
}
