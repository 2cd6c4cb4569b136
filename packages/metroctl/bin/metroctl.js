#!/usr/bin/env node
// Launches the built CLI (npm install builds it: see the root "prepare" script).
require("../dist/main.js");
