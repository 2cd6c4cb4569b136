/**
 * The state dir's `cluster.json`: the nodes of a local cluster (name,
 * address, node ID), which is what `up()` needs to resume the cluster from
 * disk. It is written once a node has joined, and only through
 * `@metropolis/localstorage`'s `atomicWriteFile` (temporary file, fsync,
 * rename, fsync of the directory), so a launcher killed at any instant
 * leaves the old list or the new one, never a torn file.
 */
import { readFile } from "node:fs/promises";
import { atomicWriteFile } from "@metropolis/localstorage";
import { StateFileError } from "./errors";

/** One node as cluster.json records it. */
export interface RecordedNode {
  /** `node<index>`. */
  name: string;
  address: string;
  /** Its node ID, `metropolis-…`. */
  id: string;
}

/** The content of cluster.json. */
export interface ClusterStateFile {
  version: 1;
  /** In order: node1 (which bootstrapped the cluster) first. */
  nodes: RecordedNode[];
}

/** Whether `value` is a node as cluster.json records it. */
function isRecordedNode(value: unknown): value is RecordedNode {
  return (
    typeof value === "object" &&
    value !== null &&
    "name" in value &&
    typeof value.name === "string" &&
    "address" in value &&
    typeof value.address === "string" &&
    "id" in value &&
    typeof value.id === "string" &&
    /^metropolis-/.test(value.id)
  );
}

/**
 * Reads the cluster.json at `path`; undefined when there is none (a new
 * cluster).
 *
 * @throws StateFileError when it cannot be read or is not a local cluster's state.
 */
export async function readClusterState(path: string): Promise<ClusterStateFile | undefined> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new StateFileError(`cannot read ${path}: ${(e as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new StateFileError(`${path} is not JSON: ${(e as Error).message}`);
  }
  if (
    typeof parsed !== "object" ||
    parsed === null ||
    !("version" in parsed) ||
    parsed.version !== 1 ||
    !("nodes" in parsed) ||
    !Array.isArray(parsed.nodes) ||
    parsed.nodes.length === 0 ||
    !parsed.nodes.every(isRecordedNode)
  ) {
    throw new StateFileError(
      `${path} is not a local cluster's state (remove the state dir to start afresh)`,
    );
  }
  return { version: 1, nodes: parsed.nodes };
}

/** Replaces the cluster.json at `path` with `nodes`, atomically and durably. */
export async function writeClusterState(
  path: string,
  nodes: readonly RecordedNode[],
): Promise<void> {
  const state: ClusterStateFile = {
    version: 1,
    nodes: nodes.map(({ name, address, id }) => ({ name, address, id })),
  };
  await atomicWriteFile(path, Buffer.from(JSON.stringify(state, null, 2) + "\n"));
}
