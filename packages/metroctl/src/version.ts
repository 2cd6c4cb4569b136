/**
 * `metroctl version`: the version of metroctl's package, read from its
 * package.json (found as `package-root.ts` says, so the bundle and tsc's
 * output answer alike).
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { MetroctlError } from "./errors";
import { packageRoot } from "./package-root";

/** The version field of metroctl's package.json. */
export async function metroctlVersion(): Promise<string> {
  const path = join(packageRoot(), "package.json");
  const parsed: unknown = JSON.parse(await readFile(path, "utf8"));
  const version =
    typeof parsed === "object" && parsed !== null && "version" in parsed
      ? parsed.version
      : undefined;
  if (typeof version !== "string") throw new MetroctlError(`${path} has no version`);
  return version;
}
