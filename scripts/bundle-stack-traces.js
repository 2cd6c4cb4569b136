// Stack traces of a bundle that name the TypeScript sources. esbuild injects
// this module at the top of each bundle (scripts/build-bundles.js), where
// `__filename` is the bundle itself. The first time a stack trace is
// formatted it reads the bundle's source map (`<bundle>.map`, written next to
// it) and from then on writes every frame in the bundle as the source line it
// was built from: `at listNodes (…/packages/metroctl/src/nodes-command.ts:74:3)`.
//
// Why not Node's --enable-source-maps: it reads and parses the whole map
// (2 MB) when the bundle is loaded, on every start, which is most of what a
// bundle saves `metroctl --help`; and it applies only where the flag is given
// (a shebang is ignored by `node bundle.js` and by local-cluster's spawn).
// This costs nothing until an error's stack is read, however the bundle runs.
"use strict";
/* global __filename */
const { readFileSync } = require("node:fs");
const { SourceMap } = require("node:module");
const { dirname, resolve } = require("node:path");

const bundle = __filename;
/** The bundle's source map: undefined until first needed, null when it cannot be read. */
let map;

function sourceMap() {
  if (map === undefined) {
    try {
      map = new SourceMap(JSON.parse(readFileSync(`${bundle}.map`, "utf8")));
    } catch {
      map = null;
    }
  }
  return map;
}

/** V8's text of one frame, with a position in the bundle replaced by its source's. */
function mappedFrame(site) {
  const text = site.toString();
  const line = site.getLineNumber();
  const column = site.getColumnNumber();
  if (site.getFileName() !== bundle || line === null || column === null) return text;
  const found = sourceMap()?.findEntry(line - 1, column - 1);
  if (!found || typeof found.originalSource !== "string") return text;
  const source = resolve(dirname(bundle), found.originalSource);
  return text.replace(
    `${bundle}:${line}:${column}`,
    `${source}:${found.originalLine + 1}:${found.originalColumn + 1}`,
  );
}

/** One frame as mappedFrame says, or as V8 does should anything go wrong: never a throw. */
function frame(site) {
  try {
    return mappedFrame(site);
  } catch {
    return String(site);
  }
}

Error.prepareStackTrace = (error, sites) => {
  let header;
  try {
    header = Error.prototype.toString.call(error);
  } catch {
    header = "Error";
  }
  return header + sites.map((site) => `\n    at ${frame(site)}`).join("");
};
