/**
 * The marker file of a data directory: it says that the directory holds a
 * node, under which policy, and carries the key check value that lets a wrong
 * unlock key be caught at mount time. JSON, because an operator inspecting a
 * broken node should be able to read it.
 */

/**
 * How a node's data directory protects its secrets; mirrors Monogon's
 * `NodeStorageSecurity`. `encrypted` and `authenticated-encrypted` both store
 * secret files with AES-256-GCM (which authenticates as it encrypts, so in
 * userspace there is no cheaper unauthenticated mode worth offering); they stay
 * distinct so that the cluster's policy is recorded and enforced as given.
 * `insecure` stores everything plain.
 */
export type DataPolicy = "insecure" | "encrypted" | "authenticated-encrypted";

/** Every {@link DataPolicy}, for validating input that did not come through the type checker. */
export const dataPolicies: readonly DataPolicy[] = [
  "insecure",
  "encrypted",
  "authenticated-encrypted",
];

/** The content of a data directory's marker file. */
export interface DataMarker {
  readonly policy: DataPolicy;
  /** AES-GCM envelope of a known block under the data key; absent for `insecure`. */
  readonly keyCheck?: Buffer;
}

const format = "metropolis-ts data directory";
const version = 1;

/** Serialises a marker. */
export function encodeMarker(marker: DataMarker): Buffer {
  return Buffer.from(
    JSON.stringify({
      format,
      version,
      policy: marker.policy,
      ...(marker.keyCheck === undefined ? {} : { keyCheck: marker.keyCheck.toString("base64") }),
    }) + "\n",
  );
}

/** Parses and validates a marker; throws an `Error` saying what is wrong. */
export function decodeMarker(bytes: Buffer): DataMarker {
  const parsed: unknown = JSON.parse(bytes.toString("utf8"));
  if (typeof parsed !== "object" || parsed === null) {
    throw new Error("not a JSON object");
  }
  const fields = parsed as Record<string, unknown>;
  if (fields.format !== format || fields.version !== version) {
    throw new Error(`not a version ${version} "${format}" marker`);
  }
  const policy = fields.policy;
  if (!dataPolicies.includes(policy as DataPolicy)) {
    throw new Error(`unknown policy ${JSON.stringify(policy)}`);
  }
  if (policy === "insecure") {
    return { policy };
  }
  if (typeof fields.keyCheck !== "string" || fields.keyCheck === "") {
    throw new Error(`policy "${String(policy)}" requires a key check value`);
  }
  return { policy: policy as DataPolicy, keyCheck: Buffer.from(fields.keyCheck, "base64") };
}
