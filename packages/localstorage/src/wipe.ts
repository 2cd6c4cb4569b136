/**
 * Erasing a node's storage, for a node its cluster decommissioned with a
 * wipe: everything of the node's data directory (etcd's data, the node's
 * credentials and keys, its roles, its workloads' data, the data marker)
 * and of its ESP (node parameters, sealed configuration, cluster
 * directory). The machine key, which belongs to the machine (it stands in
 * for a TPM) and opens nothing once the sealed configuration is gone, stays;
 * so do the directories themselves, empty.
 *
 * Nothing here decides whether to wipe: the caller must hold the cluster's
 * word for it (metropolis-node wipes only on its record from the curator).
 * The node must be stopped first: nothing may write below the directories
 * while they are emptied.
 *
 * A wipe is never half-done silently: every entry is tried, even after one
 * failed, and the directories are listed again afterwards; anything left
 * (or any directory that could not be read) rejects with
 * {@link WipeIncompleteError} naming what remains and why.
 */
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { WipeIncompleteError } from "./errors";
import type { NodeRoot } from "./node-root";

/** What a wipe erased: each directory emptied, with the entries it held. */
export interface WipeReport {
  readonly emptied: readonly { readonly path: string; readonly removed: readonly string[] }[];
}

/**
 * Whether `e` is a file system error with `code`. Duck-typed: an error of
 * another realm (a test sandbox) is not `instanceof Error`.
 */
function hasCode(e: unknown, code: string): boolean {
  return typeof e === "object" && e !== null && "code" in e && e.code === code;
}

/** The message of anything thrown (duck-typed, as {@link hasCode}). */
function messageOf(e: unknown): string {
  return typeof e === "object" && e !== null && "message" in e && typeof e.message === "string"
    ? e.message
    : String(e);
}

/** The entries of `path`; none when it does not exist. */
async function entries(path: string): Promise<string[]> {
  try {
    return await readdir(path);
  } catch (e) {
    if (hasCode(e, "ENOENT")) return [];
    throw e;
  }
}

/**
 * Empties the node's data directory and ESP (see the module comment).
 * @throws WipeIncompleteError when anything is left, or a directory could not be read
 */
export async function wipeNodeStorage(root: NodeRoot): Promise<WipeReport> {
  const dirs = [root.data.fullPath, root.esp.fullPath];
  const failures: string[] = [];
  const emptied: { path: string; removed: string[] }[] = [];
  for (const dir of dirs) {
    let names: string[];
    try {
      names = await entries(dir);
    } catch (e) {
      failures.push(`${dir}: ${messageOf(e)}`);
      continue;
    }
    const removed: string[] = [];
    for (const name of names) {
      const path = join(dir, name);
      try {
        await rm(path, { recursive: true, force: true });
        removed.push(name);
      } catch (e) {
        failures.push(`${path}: ${messageOf(e)}`);
      }
    }
    emptied.push({ path: dir, removed });
  }
  // What is there now, whatever rm said: the proof that the wipe is done.
  const remaining: string[] = [];
  for (const dir of dirs) {
    try {
      remaining.push(...(await entries(dir)).map((name) => join(dir, name)));
    } catch (e) {
      if (!failures.some((f) => f.startsWith(`${dir}:`))) {
        failures.push(`${dir}: ${messageOf(e)}`);
      }
    }
  }
  if (remaining.length > 0 || failures.length > 0)
    throw new WipeIncompleteError(remaining, failures);
  return { emptied };
}
