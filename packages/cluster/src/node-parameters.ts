/**
 * Node parameters: what an operator hands a node to bootstrap a cluster or
 * to register into one (written by `metroctl bootstrap-params` /
 * `register-params`). They come from `esp/metropolis/parameters.pb`, or from
 * a file named on the command line, which wins when both exist.
 *
 * Everything is validated before the node acts on it: a node that starts
 * enrolling on bad parameters may format storage for nothing.
 */
import { readFile } from "node:fs/promises";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { checkLabelCount, validateLabels } from "@metropolis/curator";
import type { File } from "@metropolis/localstorage";
import { parseCertificate, verifyCertificate } from "@metropolis/pki";
import { api } from "@metropolis/proto";
import type { Logger } from "@metropolis/supervisor";
import { NodeParametersError } from "./errors";

/** The enrolment flow the parameters ask for. */
export type Enrolment =
  | { kind: "bootstrap"; bootstrap: api.NodeParameters_ClusterBootstrap }
  | { kind: "register"; register: api.NodeParameters_ClusterRegister };

/** Field numbers of the `cluster` oneof in NodeParameters. */
const bootstrapField = 1;
const registerField = 2;

/**
 * Decodes and validates node parameters from `bytes`, read from `source`
 * (named in errors). Protobuf decoding keeps the last of two oneof fields
 * silently, so the raw fields are checked first: parameters that set both
 * are refused rather than half-obeyed.
 */
export async function parseNodeParameters(bytes: Uint8Array, source: string): Promise<Enrolment> {
  const bad = (what: string) => new NodeParametersError(`node parameters in ${source}: ${what}`);
  if (bytes.length === 0) throw bad("the file is empty");
  const fields = new Set<number>();
  let params: api.NodeParameters;
  try {
    const reader = new BinaryReader(bytes);
    while (reader.pos < reader.len) {
      const [field, wireType] = reader.tag();
      fields.add(field);
      reader.skip(wireType, field);
    }
    params = api.NodeParameters.decode(bytes);
  } catch (e) {
    throw bad(`not a NodeParameters message (${e instanceof Error ? e.message : String(e)})`);
  }
  if (fields.has(bootstrapField) && fields.has(registerField)) {
    throw bad("both cluster_bootstrap and cluster_register are set; set exactly one");
  }
  const cluster = params.cluster;
  if (!cluster) throw bad("neither cluster_bootstrap nor cluster_register is set");
  // The curator's own rules: a bootstrap would otherwise set up storage and
  // seal its configuration before the control plane refused the labels.
  const labels =
    cluster.$case === "clusterBootstrap"
      ? cluster.clusterBootstrap.labels
      : cluster.clusterRegister.labels;
  try {
    validateLabels(labels);
    checkLabelCount(labels);
  } catch (e) {
    throw bad(`labels: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (cluster.$case === "clusterBootstrap") {
    const key = cluster.clusterBootstrap.ownerPublicKey;
    if (key.length !== 32)
      throw bad(`owner_public_key must be a 32-byte Ed25519 key, got ${key.length} bytes`);
    return { kind: "bootstrap", bootstrap: cluster.clusterBootstrap };
  }
  const register = cluster.clusterRegister;
  if (register.registerTicket.length !== 32) {
    throw bad(`register_ticket must be 32 bytes, got ${register.registerTicket.length}`);
  }
  const nodes = register.clusterDirectory?.nodes ?? [];
  if (nodes.length === 0 || !nodes.some((n) => n.addresses.some((a) => a.host !== ""))) {
    throw bad(
      "cluster_directory lists no node with an address: the node could not reach the cluster",
    );
  }
  try {
    const ca = parseCertificate(register.caCertificate);
    await verifyCertificate(ca, ca);
  } catch (e) {
    throw bad(
      `ca_certificate is not a valid self-signed CA certificate: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  return { kind: "register", register };
}

/**
 * Reads the node parameters: from `commandLinePath` if given (it wins, with a
 * warning, over parameters on the ESP), else from the ESP file.
 */
export async function readNodeParameters(
  esp: File<api.NodeParameters>,
  commandLinePath: string | undefined,
  logger: Logger,
): Promise<Enrolment> {
  const onEsp = await esp.exists();
  if (commandLinePath !== undefined) {
    if (onEsp)
      logger.warn(
        `node parameters found both on the ESP and in ${commandLinePath}; using ${commandLinePath}`,
      );
    let bytes: Buffer;
    try {
      bytes = await readFile(commandLinePath);
    } catch (e) {
      throw new NodeParametersError(
        `cannot read node parameters from ${commandLinePath}: ${e instanceof Error ? e.message : String(e)}`,
      );
    }
    return parseNodeParameters(bytes, commandLinePath);
  }
  if (!onEsp) {
    throw new NodeParametersError(
      `no node parameters: neither ${esp.fullPath} exists nor was a parameters file given on the command line`,
    );
  }
  return parseNodeParameters(await readFile(esp.fullPath), esp.fullPath);
}
