#!/usr/bin/env node
// The `metropolis-node` executable: the bundle bundle/metropolis-node.js (all
// of the node in one file), run through V8's code cache by bundle/launcher.js.
// Both are built by `npm run build:bundles` (scripts/build-bundles.js), which
// `npm install` runs; tsc's output of the same entry is dist/main.js.
"use strict";
/* global __dirname */
const { join } = require("node:path");

const bundle = join(__dirname, "..", "bundle");
let launcher;
try {
  launcher = require(join(bundle, "launcher.js"));
} catch (e) {
  process.stderr.write(
    `metropolis-node is not built (${e.message}): run \`npm run build:bundles\`\n`,
  );
  process.exit(1);
}
launcher.launch(join(bundle, "metropolis-node.js"));
