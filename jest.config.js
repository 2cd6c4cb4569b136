// Tests run TypeScript sources directly through SWC (type checking is `tsc -b`,
// run separately by `npm test`). Workspace packages are mapped to their sources
// so that a test never depends on a stale build in dist/.
/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: "node",
  transform: {
    "^.+\\.ts$": ["@swc/jest"],
    // ESM-only dependencies (metroctl's CEL filter): Node (>= 20.19) require()s them as they
    // are, but Jest's module loader cannot, so SWC compiles them to CommonJS for the tests.
    "/node_modules/@marcbachmann/cel-js/.+\\.js$": ["@swc/jest", { module: { type: "commonjs" } }],
  },
  transformIgnorePatterns: ["/node_modules/(?!@marcbachmann/cel-js/)"],
  testMatch: [
    "<rootDir>/packages/*/test/**/*.test.ts",
    "<rootDir>/proto/test/**/*.test.ts",
    "<rootDir>/local-cluster/test/**/*.test.ts",
    "<rootDir>/chaos/test/**/*.test.ts",
    "<rootDir>/e2e/**/*.test.ts",
  ],
  moduleNameMapper: {
    // Relative imports written with their output's extension (`import("./x.js")`, as Node's
    // ES module resolution wants for a dynamic import) are the sources' ".ts" here.
    "^(\\.{1,2}/.+)\\.js$": "$1",
    "^@metropolis/proto$": "<rootDir>/proto/src/index.ts",
    "^@metropolis/local-cluster$": "<rootDir>/local-cluster/src/index.ts",
    "^@metropolis/chaos$": "<rootDir>/chaos/src/index.ts",
    "^@metropolis/([a-z-]+)$": "<rootDir>/packages/$1/src/index.ts",
    "^@metropolis/([a-z-]+)/([a-z-]+)$": "<rootDir>/packages/$1/src/$2.ts",
  },
  testTimeout: 30000,
  // Reports what the tests left alive (see scripts/jest-open-handles.js).
  globalTeardown: "<rootDir>/scripts/jest-open-handles.js",
  // With METROPOLIS_TRACE_TIMERS=1, names where each leftover timer was made.
  globalSetup: "<rootDir>/scripts/jest-trace-timers.js",
};
