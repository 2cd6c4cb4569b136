/**
 * Parsers of flag and argument values. Each one refuses what it cannot use
 * with a {@link UsageError} naming the flag and the value, before metroctl
 * talks to the cluster: a typo must not turn into a half-applied change.
 */
import { validateLabels } from "@metropolis/curator";
import { isNodeId } from "@metropolis/pki";
import { common } from "@metropolis/proto";
import { describeError, UsageError } from "./errors";

/** `flag: ` for messages about a flag's value; nothing for a positional argument. */
const prefix = (flag: string | undefined) => (flag === undefined ? "" : `${flag}: `);

/** Checks labels with the curator's own rules, so the cluster never refuses what passed here. */
function checkLabels(labels: ReadonlyMap<string, string>, flag: string | undefined): void {
  try {
    validateLabels(labels);
  } catch (e) {
    throw new UsageError(`${prefix(flag)}${describeError(e)}`, { cause: e });
  }
}

/** Parses `key=value` (value may be empty); `flag` names the flag in errors. */
export function parseLabel(text: string, flag?: string): [string, string] {
  const eq = text.indexOf("=");
  if (eq <= 0) throw new UsageError(`${prefix(flag)}"${text}" is not key=value`);
  const key = text.slice(0, eq);
  const value = text.slice(eq + 1);
  checkLabels(new Map([[key, value]]), flag);
  return [key, value];
}

/** Parses repeated `--label k=v` flags into a map; a key given twice is an error. */
export function parseLabels(texts: readonly string[], flag = "--label"): Map<string, string> {
  const labels = new Map<string, string>();
  for (const text of texts) {
    const [key, value] = parseLabel(text, flag);
    if (labels.has(key)) throw new UsageError(`${prefix(flag)}key "${key}" given twice`);
    labels.set(key, value);
  }
  return labels;
}

/** A label change of `metroctl label`: `k=v` sets, `k-` removes. */
export interface LabelChanges {
  add: Map<string, string>;
  remove: string[];
}

/** Parses the `k=v|k-` arguments of `metroctl label`. */
export function parseLabelChanges(texts: readonly string[]): LabelChanges {
  const add = new Map<string, string>();
  const remove: string[] = [];
  for (const text of texts) {
    if (text.includes("=")) {
      const [key, value] = parseLabel(text);
      add.set(key, value);
    } else if (text.endsWith("-") && text.length > 1) {
      const key = text.slice(0, -1);
      // A key is checked as a label with an empty value: the key rules are the same.
      checkLabels(new Map([[key, ""]]), undefined);
      remove.push(key);
    } else {
      throw new UsageError(`"${text}" is neither key=value (set) nor key- (remove)`);
    }
  }
  const both = remove.filter((key) => add.has(key));
  if (both.length > 0) throw new UsageError(`"${both[0]}" is both set and removed`);
  return { add, remove };
}

/** Parses `on` / `off` (also true/false, yes/no, 1/0). */
export function parseOnOff(text: string, flag: string): boolean {
  switch (text.toLowerCase()) {
    case "on":
    case "true":
    case "yes":
    case "1":
      return true;
    case "off":
    case "false":
    case "no":
    case "0":
      return false;
    default:
      throw new UsageError(`${flag}: "${text}" is not on or off`);
  }
}

/** Parses a positive number of seconds; returns milliseconds. */
export function parseSeconds(text: string, flag: string): number {
  const seconds = /^\d+(\.\d+)?$/.test(text.trim()) ? Number(text) : NaN;
  if (!(seconds > 0) || !Number.isFinite(seconds)) {
    throw new UsageError(`${flag}: "${text}" is not a positive number of seconds`);
  }
  return Math.round(seconds * 1000);
}

/** Parses a non-negative integer (e.g. `--tail`). */
export function parseCount(text: string, flag: string, max = 0xffffffff): number {
  const n = /^\d+$/.test(text.trim()) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n > max) {
    throw new UsageError(`${flag}: "${text}" is not a whole number from 0 to ${max}`);
  }
  return n;
}

/** Parses a TCP port. */
export function parsePortFlag(text: string, flag: string): number {
  const port = parseCount(text, flag, 65535);
  if (port === 0) throw new UsageError(`${flag}: port 0 cannot be dialed`);
  return port;
}

/** Checks that `text` has the shape of a node ID (`metropolis-` + 32 hex digits). */
export function parseNodeId(text: string): string {
  if (!isNodeId(text)) {
    throw new UsageError(`"${text}" is not a node ID (metropolis- followed by 32 hex digits)`);
  }
  return text;
}

/** The operator's names of node states: the enum names without prefix (NEW, STANDBY, UP, …). */
export function nodeStateName(state: common.NodeState): string {
  return common.NodeState[state] ?? `STATE_${state}`;
}

/** The operator's names of node health: UNKNOWN, HEALTHY, HEARTBEAT_TIMEOUT. */
export function nodeHealthName(health: common.NodeHealth): string {
  return common.NodeHealth[health] ?? `HEALTH_${health}`;
}

/** Parses `--state` (case-insensitive). */
export function parseNodeState(text: string): common.NodeState {
  const valid = [
    common.NodeState.NEW,
    common.NodeState.STANDBY,
    common.NodeState.UP,
    common.NodeState.DECOMMISSIONED,
  ];
  const found = valid.find((state) => nodeStateName(state) === text.toUpperCase());
  if (found === undefined) {
    throw new UsageError(
      `--state: "${text}" is not one of ${valid.map((state) => nodeStateName(state)).join(", ")}`,
    );
  }
  return found;
}

/** Parses `--health` (case-insensitive). */
export function parseNodeHealth(text: string): common.NodeHealth {
  const valid = [
    common.NodeHealth.UNKNOWN,
    common.NodeHealth.HEALTHY,
    common.NodeHealth.HEARTBEAT_TIMEOUT,
  ];
  const found = valid.find((health) => nodeHealthName(health) === text.toUpperCase());
  if (found === undefined) {
    throw new UsageError(
      `--health: "${text}" is not one of ${valid.map((health) => nodeHealthName(health)).join(", ")}`,
    );
  }
  return found;
}
