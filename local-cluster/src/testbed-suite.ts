/**
 * The gate of a test suite that needs the multi-host testbed: whether it
 * runs here, and its title, which says why it is skipped where it is not
 * (a skipped suite must say so in the report, not pass silently).
 *
 * ```ts
 * const suite = testbedSuite("partition: the leader's host cut off");
 * (suite.runs ? describe : describe.skip)(suite.title, () => { ... });
 * ```
 */
import { testbedAvailability } from "./testbed-availability";

/** See the module comment. */
export interface TestbedSuite {
  /** Whether a testbed (and whatever else the suite needs) is here. */
  readonly runs: boolean;
  /** The suite's title, or "TITLE: SKIPPED, why" where it does not run. */
  readonly title: string;
}

/**
 * The gate of suite `title`: it runs where a testbed can be built and
 * `needs` (what else the suite needs, e.g. libfaketime) names nothing missing.
 * @param needs says in one line what is missing, or undefined when nothing is.
 */
export function testbedSuite(title: string, needs?: () => string | undefined): TestbedSuite {
  const availability = testbedAvailability();
  const missing = availability.ok ? needs?.() : `no testbed here: ${availability.reason}`;
  return missing === undefined
    ? { runs: true, title }
    : { runs: false, title: `${title}: SKIPPED, ${missing}` };
}
