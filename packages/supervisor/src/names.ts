/** Rules for child and sub-logger names, shared by the tree and MockContext. */
import { InvalidNameError } from "./errors";

const namePattern = /^[a-z0-9_-]{1,64}$/;

/** Throws InvalidNameError unless `name` is a legal child or sub-logger name under `dn`. */
export function validateName(dn: string, name: string): void {
  if (typeof name !== "string" || !namePattern.test(name)) throw new InvalidNameError(dn, name);
}
