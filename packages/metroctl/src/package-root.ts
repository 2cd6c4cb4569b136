/**
 * Where metroctl's package is on disk, found from the running code: the
 * nearest directory above it holding a package.json. The same answer from
 * every way metroctl runs — the TypeScript sources (`src/`, tests), tsc's
 * output (`dist/`, `dist/observe/`) and the bundle (`bundle/metroctl.js`,
 * where every module's `__dirname` is the bundle's directory) — so files
 * that ship with the package (package.json, the observer's page) are found
 * by their place in the package, not by the depth of the module asking.
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { MetroctlError } from "./errors";

/** The package is not above `start`: metroctl's files were moved apart. */
export class PackageRootMissingError extends MetroctlError {
  constructor(start: string) {
    super(`no package.json above ${start}: metroctl's files are not in their package`);
  }
}

/** The nearest directory at or above `start` holding a package.json. */
export function findPackageRoot(start: string): string {
  for (let dir = start; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json"))) return dir;
    if (dirname(dir) === dir) throw new PackageRootMissingError(start);
  }
}

/** metroctl's package directory (packages/metroctl in this repository). */
export function packageRoot(): string {
  return findPackageRoot(__dirname);
}
