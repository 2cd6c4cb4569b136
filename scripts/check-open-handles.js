#!/usr/bin/env node
// Fails when the test run left timers, sockets or processes alive (see
// scripts/jest-open-handles.js, which writes the report this reads).
const fs = require("node:fs");

const file = process.argv[2] ?? "reports/open-handles.json";
const { leftovers } = JSON.parse(fs.readFileSync(file, "utf8"));
if (leftovers.length === 0) process.exit(0);
console.error(
  `the tests left ${leftovers.length} resource(s) keeping the process alive after the run ` +
    `(jest would never have exited without --forceExit): ${leftovers.join(", ")}`,
);
process.exit(1);
