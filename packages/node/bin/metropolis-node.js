#!/usr/bin/env node
// Launches the built node binary (npm install builds it: see the root "prepare" script).
require("../dist/main.js");
