/**
 * The rule for runnable names (children and sub-loggers), shared by the
 * tree, MockContext, and code that checks a name before it reaches the tree
 * (a workload spec checked when the node is configured).
 */
import { InvalidNameError } from "./errors";

/** What a child or sub-logger name must match: `^[a-z0-9_-]{1,64}$`. */
export const runnableNamePattern = /^[a-z0-9_-]{1,64}$/;

/** Whether `name` may name a child or a sub-logger. */
export function isRunnableName(name: string): boolean {
  return typeof name === "string" && runnableNamePattern.test(name);
}

/** Throws InvalidNameError unless `name` is a legal child or sub-logger name under `dn`. */
export function validateName(dn: string, name: string): void {
  if (!isRunnableName(name)) throw new InvalidNameError(dn, name);
}
