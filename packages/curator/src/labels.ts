/**
 * Node labels: validation of what RegisterNode and UpdateNodeLabels accept.
 *
 * Labels follow Kubernetes' rules, because they are meant to end up on the
 * Kubernetes Node objects of the cluster: a label the curator accepted must
 * never be one the Kubernetes API server rejects later.
 *
 * - key: `[prefix/]name`; name 1–63 characters, alphanumeric at both ends,
 *   `-`, `_`, `.` allowed inside; prefix a DNS subdomain (lowercase RFC 1123
 *   labels joined by dots, at most 253 characters).
 * - value: empty, or 1–63 characters with the same shape as a name.
 * - at most {@link maxLabelsPerNode} labels per node.
 *
 * Requests are checked in two steps: {@link checkLabelBounds} first (count and
 * lengths: cheap, and revealing only the public limits, so it may run before
 * the caller is authorized), {@link validateLabels} after (the characters).
 * Error messages quote keys and values cut short (bounded-text.ts).
 */
import { quoted } from "./bounded-text";
import { InvalidArgumentError } from "./errors";

/** Labels a node may carry at most; bounds the size of node records and of GetNodes answers. */
export const maxLabelsPerNode = 128;

const nameMaxLength = 63;
const prefixMaxLength = 253;

/** Longest valid label key: a prefix of 253 characters, `/`, a name of 63. */
export const maxLabelKeyLength = prefixMaxLength + 1 + nameMaxLength;
/** Longest valid label value. */
export const maxLabelValueLength = nameMaxLength;

const namePattern = /^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$/;
const dnsLabelPattern = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

/** Why `name` is not a valid label name or value, or undefined when it is. */
function nameProblem(name: string, what: string): string | undefined {
  if (name.length > nameMaxLength) return `${what} is longer than ${nameMaxLength} characters`;
  if (!namePattern.test(name)) {
    return `${what} must consist of letters, digits, '-', '_' or '.', and start and end with a letter or digit`;
  }
  return undefined;
}

/** Why `prefix` is not a valid DNS subdomain, or undefined when it is. */
function prefixProblem(prefix: string): string | undefined {
  if (prefix.length > prefixMaxLength) return `prefix is longer than ${prefixMaxLength} characters`;
  const parts = prefix.split(".");
  if (parts.some((part) => part.length > nameMaxLength || !dnsLabelPattern.test(part))) {
    return "prefix must be a DNS subdomain (lowercase letters, digits and '-', in dot-separated parts)";
  }
  return undefined;
}

/** Why `key` is not a valid label key, or undefined when it is. */
export function labelKeyProblem(key: string): string | undefined {
  if (key.length === 0) return "key is empty";
  const slash = key.indexOf("/");
  if (slash === -1) return nameProblem(key, "key");
  if (key.indexOf("/", slash + 1) !== -1) return "key has more than one '/'";
  return (
    prefixProblem(key.slice(0, slash)) ??
    nameProblem(key.slice(slash + 1), "key name (after the prefix)")
  );
}

/** Why `value` is not a valid label value, or undefined when it is. */
export function labelValueProblem(value: string): string | undefined {
  // An empty value is valid, as in Kubernetes: the label's presence is the information.
  return value === "" ? undefined : nameProblem(value, "value");
}

/** Throws InvalidArgumentError naming the first invalid key. */
export function validateLabelKey(key: string): void {
  const problem = labelKeyProblem(key);
  if (problem !== undefined)
    throw new InvalidArgumentError(`invalid label key ${quoted(key)}: ${problem}`);
}

/**
 * Checks every key and value of `labels`; throws InvalidArgumentError naming
 * the first invalid one. Does not check the count (see {@link checkLabelCount}).
 */
export function validateLabels(labels: ReadonlyMap<string, string>): void {
  for (const [key, value] of labels) {
    validateLabelKey(key);
    const problem = labelValueProblem(value);
    if (problem !== undefined) {
      throw new InvalidArgumentError(
        `invalid value ${quoted(value)} of label ${quoted(key)}: ${problem}`,
      );
    }
  }
}

/** Throws InvalidArgumentError when `labels` has more than {@link maxLabelsPerNode} entries. */
export function checkLabelCount(labels: ReadonlyMap<string, string>): void {
  const count = labels.size;
  if (count > maxLabelsPerNode) {
    throw new InvalidArgumentError(
      `too many labels: ${count}, a node may have at most ${maxLabelsPerNode}`,
    );
  }
}

/** Throws InvalidArgumentError when a key is longer than {@link maxLabelKeyLength}. */
export function checkLabelKeyLength(key: string): void {
  if (key.length > maxLabelKeyLength) {
    throw new InvalidArgumentError(
      `label key ${quoted(key)} is longer than ${maxLabelKeyLength} characters`,
    );
  }
}

/**
 * The size checks of `labels`, made before anything else looks at them:
 * the count ({@link checkLabelCount}) and each key's and value's length.
 * Throws InvalidArgumentError naming the first that is too large.
 */
export function checkLabelBounds(labels: ReadonlyMap<string, string>): void {
  checkLabelCount(labels);
  for (const [key, value] of labels) {
    checkLabelKeyLength(key);
    if (value.length > maxLabelValueLength) {
      throw new InvalidArgumentError(
        `value ${quoted(value)} of label ${quoted(key)} is longer than ${maxLabelValueLength} characters`,
      );
    }
  }
}
