#!/usr/bin/env node
// Prints the plain "N passed, N failed" line that CI reads, from jest's --json report.
// Exits non-zero when the report is missing or records a failure.
const fs = require("node:fs");

const file = process.argv[2] ?? "reports/jest.json";
let report;
try {
  report = JSON.parse(fs.readFileSync(file, "utf8"));
} catch (e) {
  console.error(
    `no jest report at ${file} (${e.message}): the test command failed before jest finished`,
  );
  process.exit(1);
}
const failed = report.numFailedTests + (report.numRuntimeErrorTestSuites ?? 0);
console.log(`${report.numPassedTests} passed, ${failed} failed`);
process.exit(report.success && failed === 0 ? 0 : 1);
