// Lets a test's child process run this repository's TypeScript sources the way jest does (SWC,
// the settings of the root .swcrc): `node -r local-cluster/test/swc-register.js file.ts …`.
// A test needs it to make a real process of its own that runs the code under test and can then
// be killed (a testbed's owner dying, a launcher without root). Workspace packages
// (`@metropolis/…`) resolve through node_modules to their builds.
const { readFileSync } = require("node:fs");
const { transformSync } = require("@swc/core");

require.extensions[".ts"] = (module, filename) => {
  const { code } = transformSync(readFileSync(filename, "utf8"), {
    filename,
    swcrc: false,
    jsc: { parser: { syntax: "typescript" }, target: "es2022" },
    module: { type: "commonjs" },
  });
  module._compile(code, filename);
};
