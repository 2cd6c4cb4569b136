// Runs a bundle through V8's code cache: scripts/build-bundles.js copies this
// file next to each bundle (bundle/launcher.js), and the package's `bin`
// (bin/metroctl.js, bin/metropolis-node.js) calls its `launch` with the
// bundle's path.
//
// Why: a bundle is one file, but V8 still has to parse all of it (1.3 MB for
// metroctl) on every start before it runs a line, and compile every function
// a command calls; that is most of what `metroctl --help` or `metroctl
// nodes` cost beyond Node's own start. V8 can instead load the compiled code
// it saved on an earlier run. Node 22 does this itself
// (module.enableCompileCache); Node 20 does not, so this does it the way
// Node does: the bundle is compiled with the cached data of an earlier run,
// and after a run that had none, or that compiled much the cache did not
// hold (V8's bytecode grew by more than `growthToSave`: a command not run
// before), the code compiled so far is saved for the next. Saving costs
// about 20 ms, once; a run the cache covers saves nothing.
//
// The cache is a directory private to the user ($XDG_CACHE_HOME/metropolis,
// else ~/.cache/metropolis): cached code is run as it is, so a directory or
// file that someone else owns, or that others may write, is never read from
// or written to. One file per bundle, named by the bundle's path, size and
// time of change and Node's version: a rebuilt bundle gets a new one (the old
// one is removed) and V8 refuses data of another version. Without HOME, or
// with METROPOLIS_COMPILE_CACHE=off, the bundle is just required. Nothing
// here ever fails a run: any trouble with the cache runs the bundle without.
"use strict";
const fs = require("node:fs");
const Module = require("node:module");
const { basename, dirname, join } = require("node:path");
const v8 = require("node:v8");
const vm = require("node:vm");

/**
 * Bytecode compiled during a run beyond which the cache is saved again. A
 * run the cache covers still compiles some (Node's own modules: 70 KiB for
 * `metroctl --help`, 340 KiB for `metroctl nodes`); one it does not, much
 * more (1.1 MiB for `metroctl nodes`).
 */
const growthToSave = 512 * 1024;

/** The bytecode (and its metadata) on V8's heap, in bytes. */
const bytecodeBytes = () => v8.getHeapCodeStatistics().bytecode_and_metadata_size;

/** The user's cache directory, created private if missing; undefined when it is not private. */
function cacheDir() {
  if (process.env.METROPOLIS_COMPILE_CACHE === "off") return undefined;
  const base = process.env.XDG_CACHE_HOME || (process.env.HOME && join(process.env.HOME, ".cache"));
  if (!base) return undefined;
  const dir = join(base, "metropolis");
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  return ownedPrivately(fs.lstatSync(dir), "directory") ? dir : undefined;
}

/** Whether `stats` is a `kind` of this user's that no one else may write. */
function ownedPrivately(stats, kind) {
  const isKind = kind === "directory" ? stats.isDirectory() : stats.isFile();
  return isKind && stats.uid === process.getuid() && (stats.mode & 0o022) === 0;
}

/** A 32-bit FNV-1a hash of `text`, in hex: names the bundle's path in the cache file's name. */
function fnv1a(text) {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, "0");
}

/** The cached data at `path` if it is this user's own file, else undefined. */
function readCache(path) {
  let fd;
  try {
    fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  } catch {
    return undefined;
  }
  try {
    return ownedPrivately(fs.fstatSync(fd), "file") ? fs.readFileSync(fd) : undefined;
  } finally {
    fs.closeSync(fd);
  }
}

/** Writes `data` to `path` (mode 0600, atomically) and removes the cache files of `bundle`'s earlier builds. */
function writeCache(bundle, dir, path, data) {
  const temporary = `${path}.${process.pid}.tmp`;
  fs.writeFileSync(temporary, data, { mode: 0o600, flag: "wx" });
  fs.renameSync(temporary, path);
  // This bundle's earlier builds (the same path); another checkout's stay.
  const prefix = `${basename(bundle)}-${fnv1a(bundle)}-`;
  for (const name of fs.readdirSync(dir)) {
    if (name.startsWith(prefix) && join(dir, name) !== path && name.endsWith(".v8")) {
      fs.rmSync(join(dir, name), { force: true });
    }
  }
}

/** `bundle` compiled with the cache (and what to do after the run), or undefined to require it. */
function compileCached(bundle) {
  const dir = cacheDir();
  if (dir === undefined) return undefined;
  const stats = fs.statSync(bundle);
  const key = `${fnv1a(bundle)}-${stats.size}-${Math.round(stats.mtimeMs)}-${process.version}`;
  const path = join(dir, `${basename(bundle)}-${key}.v8`);
  const cached = readCache(path);
  // The hashbang is a comment as `//`, with every position in the file kept:
  // stack traces and the source map see the bundle as it is.
  const source = fs.readFileSync(bundle, "utf8").replace(/^#!/, "//");
  const script = new vm.Script(Module.wrap(source), { filename: bundle, cachedData: cached });
  const unusable = cached === undefined || script.cachedDataRejected === true;
  const compiledBefore = bytecodeBytes();
  const save = () => {
    if (!unusable && bytecodeBytes() - compiledBefore <= growthToSave) return;
    try {
      writeCache(bundle, dir, path, script.createCachedData());
    } catch {
      // Another run saving it at the same moment, a full disk: the next run saves it.
    }
  };
  return { run: script.runInThisContext(), save };
}

/**
 * Runs the bundle at `bundle` (an absolute path) as the process's program,
 * through V8's code cache where there is a private place for it.
 */
function launch(bundle) {
  let compiled;
  try {
    compiled = compileCached(bundle);
  } catch {
    compiled = undefined;
  }
  if (compiled === undefined) {
    require(bundle);
    return;
  }
  const bundleModule = new Module(bundle, module);
  bundleModule.filename = bundle;
  process.once("exit", compiled.save);
  compiled.run.call(
    bundleModule.exports,
    bundleModule.exports,
    Module.createRequire(bundle),
    bundleModule,
    bundle,
    dirname(bundle),
  );
}

module.exports = { launch };
