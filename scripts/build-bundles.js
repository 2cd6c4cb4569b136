#!/usr/bin/env node
// Builds the two executables as single bundled, minified files with esbuild:
//
//   packages/metroctl/bundle/metroctl.js       (+ .map)
//   packages/node/bundle/metropolis-node.js    (+ .map)
//
// and beside each bundle/launcher.js (scripts/bundle-launcher.js), through
// which the package's `bin` (bin/metroctl.js, bin/metropolis-node.js) runs
// the bundle with V8's code cache (see there why).
//
// Why: unbundled, a start resolves, reads and compiles hundreds of modules
// (`metroctl nodes` loads ~800 files); a bundle is one file to read and
// compile, with no module resolution at start-up. The root `prepare` (so
// `npm install`) and `npm test` run it after `tsc -b`: `npm run build:bundles`.
//
// How:
// - The workspace packages are bundled from their TypeScript sources (as
//   jest runs them), every module of them declared free of side effects, so
//   that esbuild leaves out what an executable never uses: metroctl imports
//   the curator's client from @metropolis/curator, not the curator itself,
//   nor etcd's client that comes with it.
// - etcd3 reads its .proto files from its package directory when loaded; in
//   the bundle it gets them instead as the protobufjs descriptor they parse
//   to, made here (`etcd3Protos`), so the bundle needs no file beside it and
//   parses no .proto at start-up.
// - `keepNames`: minified, but classes and functions keep their names
//   (error names such as `MetroctlError` are printed, and stack traces name
//   functions).
// - Source maps (`<bundle>.map`, without the sources' text) and
//   scripts/bundle-stack-traces.js, injected into each bundle: stack traces
//   name the .ts sources, at no cost to start-up.
"use strict";
/* global __dirname */
const { createRequire } = require("node:module");
const { copyFileSync, existsSync, readFileSync, statSync } = require("node:fs");
const { dirname, join, relative, sep } = require("node:path");
const esbuild = require("esbuild");

const root = join(__dirname, "..");

/** The executables: entry (TypeScript) and bundle. */
const bundles = [
  {
    name: "metroctl",
    entry: "packages/metroctl/src/main.ts",
    outfile: "packages/metroctl/bundle/metroctl.js",
    // grpc-js requires it only to serve channelz or ORCA (and says so: it is
    // never loaded at start-up); a client never does. 140 KiB with protobufjs.
    leftOut: ["@grpc/proto-loader"],
  },
  {
    name: "metropolis-node",
    entry: "packages/node/src/main.ts",
    outfile: "packages/node/bundle/metropolis-node.js",
  },
];

/** Each workspace package's name and directory, from the root package.json's workspaces. */
function workspacePackages() {
  const { workspaces } = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  return new Map(
    workspaces.map((dir) => {
      const { name } = JSON.parse(readFileSync(join(root, dir, "package.json"), "utf8"));
      return [name, join(root, dir)];
    }),
  );
}

/**
 * `@metropolis/x` → x's src/index.ts, `@metropolis/x/sub` → src/sub.ts (the
 * mapping jest.config.js uses), and every module of a workspace's src/
 * declared free of side effects.
 */
function workspaceSources(packages) {
  const sourceDirs = [...packages.values()].map((dir) => join(dir, "src") + sep);
  const isWorkspaceSource = (file) => sourceDirs.some((dir) => file.startsWith(dir));
  return {
    name: "workspace-sources",
    setup(build) {
      build.onResolve({ filter: /^@metropolis\/[a-z-]+(\/[a-z-]+)?$/ }, (args) => {
        const [, name, sub] = /^(@metropolis\/[a-z-]+)(?:\/([a-z-]+))?$/.exec(args.path);
        const dir = packages.get(name);
        if (dir === undefined) return undefined;
        const path = join(dir, "src", `${sub ?? "index"}.ts`);
        if (!existsSync(path)) return { errors: [{ text: `${args.path}: no ${path}` }] };
        return { path, sideEffects: false };
      });
      build.onResolve({ filter: /^\.\.?\// }, async (args) => {
        if (args.pluginData === "workspace-sources" || !isWorkspaceSource(args.importer)) {
          return undefined;
        }
        const resolved = await build.resolve(args.path, {
          kind: args.kind,
          importer: args.importer,
          resolveDir: args.resolveDir,
          pluginData: "workspace-sources",
        });
        if (resolved.errors.length > 0) return { errors: resolved.errors };
        return { ...resolved, sideEffects: isWorkspaceSource(resolved.path) ? false : undefined };
      });
    },
  };
}

/** The loading of etcd3's protos that `etcd3Protos` replaces, as etcd3 1.1 writes it. */
const etcd3ProtoLoad = "(0, proto_loader_1.loadSync)(`${__dirname}/../proto/rpc.proto`, {";

/**
 * etcd3's rpc.proto (with kv.proto and auth.proto) as the protobufjs
 * descriptor that proto-loader's `loadSync` would parse at run time, with the
 * options etcd3 loads it with (`keepCase`: field names as written), parsed by
 * the protobufjs etcd3's proto-loader uses. proto-loader's `fromJSON` makes
 * the same package definition from it.
 */
function etcd3ProtoDescriptor() {
  const etcd3 = dirname(require.resolve("etcd3/package.json", { paths: [root] }));
  const loader = createRequire(require.resolve("@grpc/proto-loader", { paths: [etcd3] }));
  const protobuf = loader("protobufjs");
  const parsed = new protobuf.Root().loadSync(join(etcd3, "proto", "rpc.proto"), {
    keepCase: true,
  });
  parsed.resolveAll();
  return parsed.toJSON();
}

/** etcd3's connection-pool.js, loading its protos from `etcd3ProtoDescriptor` instead of files. */
function etcd3Protos() {
  return {
    name: "etcd3-protos",
    setup(build) {
      build.onLoad({ filter: /[\\/]etcd3[\\/]lib[\\/]connection-pool\.js$/ }, (args) => {
        const text = readFileSync(args.path, "utf8");
        if (text.split(etcd3ProtoLoad).length !== 2) {
          return {
            errors: [
              {
                text: `${args.path} no longer loads its protos with ${etcd3ProtoLoad}: update etcd3Protos in scripts/build-bundles.js`,
              },
            ],
          };
        }
        const descriptor = JSON.stringify(etcd3ProtoDescriptor());
        return {
          contents: text.replace(etcd3ProtoLoad, `(0, proto_loader_1.fromJSON)(${descriptor}, {`),
          loader: "js",
        };
      });
    },
  };
}

/**
 * Packages an executable never loads, left out of its bundle: a require of
 * one gets a module whose every use throws, naming what is missing.
 */
function leftOut(names) {
  const filter = new RegExp(`^(${names.map((n) => n.replace(/[/.]/g, "\\$&")).join("|")})$`);
  return {
    name: "left-out",
    setup(build) {
      build.onResolve({ filter }, (args) => ({ path: args.path, namespace: "left-out" }));
      build.onLoad({ filter: /.*/, namespace: "left-out" }, (args) => ({
        contents: `const missing = () => { throw new Error(${JSON.stringify(`${args.path} is not in this bundle (scripts/build-bundles.js)`)}); };
module.exports = new Proxy({}, { get: missing });`,
        loader: "js",
      }));
    },
  };
}

/** esbuild's options for one executable. */
function buildOptions({ entry, outfile, leftOut: left = [] }, packages) {
  return {
    absWorkingDir: root,
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "cjs",
    minify: true,
    keepNames: true,
    sourcemap: "linked",
    sourcesContent: false,
    inject: [join(__dirname, "bundle-stack-traces.js")],
    plugins: [
      workspaceSources(packages),
      etcd3Protos(),
      ...(left.length > 0 ? [leftOut(left)] : []),
    ],
    metafile: true,
    logLevel: "warning",
  };
}

/** The bytes of a bundle by the package they come from (a workspace's src, or a dependency), largest first. */
function sizesByPackage(metafile, outfile) {
  const output = Object.entries(metafile.outputs).find(([path]) => path === outfile)?.[1];
  const sizes = new Map();
  for (const [input, { bytesInOutput }] of Object.entries(output?.inputs ?? {})) {
    const dependency = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input);
    const name = dependency ? dependency[1] : input.split("/src/")[0];
    sizes.set(name, (sizes.get(name) ?? 0) + bytesInOutput);
  }
  return [...sizes].sort((a, b) => b[1] - a[1]);
}

/** Builds every bundle; resolves with their paths, sizes and sizes by package. */
async function buildBundles() {
  const packages = workspacePackages();
  const built = [];
  for (const bundle of bundles) {
    const { metafile } = await esbuild.build(buildOptions(bundle, packages));
    const path = join(root, bundle.outfile);
    copyFileSync(join(__dirname, "bundle-launcher.js"), join(dirname(path), "launcher.js"));
    const bytes = statSync(path).size;
    built.push({
      name: bundle.name,
      path,
      bytes,
      packages: sizesByPackage(metafile, bundle.outfile),
    });
  }
  return built;
}

/**
 * Builds metropolis-node as the package directory `dir` (its bundle in
 * `dir/bundle/metropolis-node.js`, and the package's package.json, where the
 * node reads its version) with some of its workspace sources replaced
 * (`replacements`: a source's path from the repository root → the file
 * whose text stands in for it): a node built differently, for tests
 * (e2e/version-skew.test.ts: a node of another wire protocol version).
 * Resolves with the bundle's path.
 */
async function buildNodeVariant(dir, replacements) {
  const node = bundles.find((b) => b.name === "metropolis-node");
  const outfile = join(dir, "bundle", "metropolis-node.js");
  const options = buildOptions({ ...node, outfile }, workspacePackages());
  const texts = new Map(
    Object.entries(replacements).map(([source, file]) => [join(root, source), file]),
  );
  for (const source of texts.keys()) {
    if (!existsSync(source)) throw new Error(`no ${relative(root, source)} to replace`);
  }
  options.plugins.unshift({
    name: "replacements",
    setup(build) {
      build.onLoad({ filter: /\.ts$/ }, (args) =>
        texts.has(args.path)
          ? { contents: readFileSync(texts.get(args.path), "utf8"), loader: "ts" }
          : undefined,
      );
    },
  });
  await esbuild.build({ ...options, metafile: false });
  copyFileSync(
    join(root, dirname(dirname(node.outfile)), "package.json"),
    join(dir, "package.json"),
  );
  return outfile;
}

module.exports = { bundles, buildBundles, buildNodeVariant, etcd3ProtoDescriptor };

/** `--node-variant DIR SOURCE=FILE…`: see buildNodeVariant. */
function nodeVariantArgs(argv) {
  const at = argv.indexOf("--node-variant");
  if (at === -1) return undefined;
  const [dir, ...pairs] = argv.slice(at + 1);
  if (dir === undefined || pairs.length === 0) {
    throw new Error("usage: build-bundles.js --node-variant DIR SOURCE=FILE...");
  }
  const replacements = {};
  for (const pair of pairs) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new Error(`--node-variant: ${pair} is not SOURCE=FILE`);
    replacements[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return { dir, replacements };
}

if (require.main === module && process.argv.includes("--node-variant")) {
  Promise.resolve()
    .then(() => nodeVariantArgs(process.argv))
    .then(({ dir, replacements }) => buildNodeVariant(dir, replacements))
    .then((bundle) => console.log(bundle))
    .catch((e) => {
      console.error(`build-bundles: ${e instanceof Error ? e.message : String(e)}`);
      process.exit(1);
    });
} else if (require.main === module) {
  const started = Date.now();
  buildBundles().then(
    (built) => {
      const analyze = process.argv.includes("--analyze");
      for (const { name, path, bytes, packages } of built) {
        console.log(`${name}: ${relative(root, path)} (${(bytes / 1024).toFixed(0)} KiB)`);
        if (!analyze) continue;
        for (const [from, size] of packages.slice(0, 25)) {
          console.log(`  ${(size / 1024).toFixed(0).padStart(5)} KiB  ${from}`);
        }
      }
      console.log(`bundles built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    },
    (e) => {
      console.error(`build-bundles: ${e instanceof Error ? e.message : String(e)}`);
      process.exit(1);
    },
  );
}
