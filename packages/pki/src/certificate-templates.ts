/**
 * What each kind of Metropolis certificate says, independent of who signs it.
 * A template describes the shape — usages, constraints, names — and leaves the
 * identity of node certificates to the subject key: a node template has no
 * name of its own, its CN and DNS SAN are the node ID of whatever key it is
 * issued for, so a node certificate can never name another node than the one
 * holding its key.
 */
import { isIP } from "node:net";
import { InvalidTemplateError } from "./errors";
import { nodeIdFromPublicKey } from "./ed25519";

/** The common name of the cluster CA, as in Monogon. */
export const CLUSTER_CA_COMMON_NAME = "Metropolis Cluster CA";

/** The kinds of certificate the Metropolis PKI issues. */
export type CertificateKind = "ca" | "node" | "user" | "ephemeral";

/** The keyUsage bits the PKI sets. Ed25519 keys only sign, so there is no keyEncipherment. */
export type KeyUsageName = "digitalSignature" | "keyCertSign" | "cRLSign";

/** The extendedKeyUsage purposes the PKI sets. */
export type ExtendedKeyUsageName = "serverAuth" | "clientAuth";

/**
 * The subject of a template: a fixed common name, or `"node-id"` for the node
 * ID of the subject key (which then also becomes the first DNS SAN).
 */
export type TemplateSubject = { readonly commonName: string } | "node-id";

/** A certificate shape; pass it to a CA or the certificate store to get a certificate. */
export interface CertificateTemplate {
  /** Which kind of certificate this is, for messages and for store sanity checks. */
  readonly kind: CertificateKind;
  /** Who the certificate names. */
  readonly subject: TemplateSubject;
  /** DNS SANs besides the node ID (which `"node-id"` subjects always get). */
  readonly dnsNames: readonly string[];
  /** IP address SANs, e.g. the 127.0.0.x addresses of etcd peers in tests. */
  readonly ipAddresses: readonly string[];
  /** Whether the certificate may sign certificates and CRLs. */
  readonly isCA: boolean;
  /** keyUsage bits (always marked critical). */
  readonly keyUsage: readonly KeyUsageName[];
  /** extendedKeyUsage purposes; empty for the CA, which is not used in TLS itself. */
  readonly extendedKeyUsage: readonly ExtendedKeyUsageName[];
  /** The access role a scoped credential bears, as its subject's OU (access-role.ts); none for others. */
  readonly accessRole?: string;
}

/** Extra subject alternative names for a node certificate. */
export interface NodeTemplateOptions {
  /** DNS names in addition to the node ID. */
  readonly dnsNames?: readonly string[];
  /** IP addresses (IPv4 or IPv6 text form). */
  readonly ipAddresses?: readonly string[];
}

/** The subject a template resolves to for a given subject key. */
export interface ResolvedSubject {
  readonly commonName: string;
  readonly dnsNames: readonly string[];
  readonly ipAddresses: readonly string[];
}

// RFC 5280's ub-common-name.
const MAX_COMMON_NAME_LENGTH = 64;
const DNS_LABEL = "(?!-)[A-Za-z0-9-]{1,63}(?<!-)";
const DNS_NAME = new RegExp(`^${DNS_LABEL}(\\.${DNS_LABEL})*$`);

/**
 * The cluster CA: self-signed, basicConstraints CA with path length 0 (it
 * signs leaf certificates only — Metropolis has one CA level), keyCertSign and
 * cRLSign.
 */
export function caTemplate(commonName: string = CLUSTER_CA_COMMON_NAME): CertificateTemplate {
  return {
    kind: "ca",
    subject: { commonName: checkCommonName(commonName, "CA common name") },
    dnsNames: [],
    ipAddresses: [],
    isCA: true,
    keyUsage: ["keyCertSign", "cRLSign"],
    extendedKeyUsage: [],
  };
}

/**
 * A node certificate: CN and first DNS SAN are the node ID of the subject key,
 * usable as TLS server and client (nodes serve the cluster API and call each
 * other), plus optional extra DNS and IP SANs.
 */
export function nodeTemplate(options: NodeTemplateOptions = {}): CertificateTemplate {
  return {
    kind: "node",
    subject: "node-id",
    dnsNames: (options.dnsNames ?? []).map((name) => checkDnsName(name)),
    ipAddresses: (options.ipAddresses ?? []).map((address) => checkIpAddress(address)),
    isCA: false,
    keyUsage: ["digitalSignature"],
    extendedKeyUsage: ["serverAuth", "clientAuth"],
  };
}

/**
 * A user certificate (metroctl's owner certificate): CN is the user, TLS
 * client only, so a leaked user key cannot impersonate a node.
 */
export function userTemplate(owner: string): CertificateTemplate {
  return {
    kind: "user",
    subject: { commonName: checkCommonName(owner, "user name") },
    dnsNames: [],
    ipAddresses: [],
    isCA: false,
    keyUsage: ["digitalSignature"],
    extendedKeyUsage: ["clientAuth"],
  };
}

/**
 * A scoped credential (metroctl's `access issue`): a user certificate whose CN
 * is the person's name, TLS client only, bearing `role` as its subject's OU
 * (access-role.ts). Give it a notAfter when issuing: its
 * expiry is the credential's.
 */
export function accessTemplate(name: string, role: string): CertificateTemplate {
  return { ...userTemplate(name), accessRole: role };
}

/**
 * The self-signed certificate of a node that is not registered yet: it only
 * proves possession of the node's key to the cluster (TLS client auth), which
 * then pins the key rather than trusting the certificate. CN and DNS SAN are
 * the node ID, like a node certificate's, so logs name the node the same way.
 */
export function ephemeralTemplate(): CertificateTemplate {
  return {
    kind: "ephemeral",
    subject: "node-id",
    dnsNames: [],
    ipAddresses: [],
    isCA: false,
    keyUsage: ["digitalSignature"],
    extendedKeyUsage: ["clientAuth"],
  };
}

/** The CN and SANs `template` gives a certificate for `subjectPublicKey`. */
export function resolveSubject(
  template: CertificateTemplate,
  subjectPublicKey: Uint8Array,
): ResolvedSubject {
  if (template.subject === "node-id") {
    const nodeId = nodeIdFromPublicKey(subjectPublicKey);
    const extra = template.dnsNames.filter((name) => name !== nodeId);
    return { commonName: nodeId, dnsNames: [nodeId, ...extra], ipAddresses: template.ipAddresses };
  }
  return {
    commonName: template.subject.commonName,
    dnsNames: template.dnsNames,
    ipAddresses: template.ipAddresses,
  };
}

function checkCommonName(value: string, what: string): string {
  if (typeof value !== "string" || value.length === 0) {
    throw new InvalidTemplateError(`${what} must be a non-empty string`);
  }
  if (value.length > MAX_COMMON_NAME_LENGTH) {
    throw new InvalidTemplateError(
      `${what} is ${value.length} characters, X.509 allows at most ${MAX_COMMON_NAME_LENGTH}`,
    );
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) {
    throw new InvalidTemplateError(`${what} ${JSON.stringify(value)} contains control characters`);
  }
  return value;
}

function checkDnsName(value: string): string {
  if (typeof value !== "string" || value.length > 253 || !DNS_NAME.test(value)) {
    throw new InvalidTemplateError(`${JSON.stringify(value)} is not a valid DNS name for a SAN`);
  }
  return value;
}

function checkIpAddress(value: string): string {
  if (typeof value !== "string" || isIP(value) === 0) {
    throw new InvalidTemplateError(`${JSON.stringify(value)} is not an IPv4 or IPv6 address`);
  }
  return value;
}
