/**
 * @metropolis/local-cluster/testing — what test files that need the
 * multi-host testbed share.
 *
 * ```ts
 * import { testbedSuite } from "@metropolis/local-cluster/testing";
 *
 * const suite = testbedSuite("hosts: three members, a namespace each");
 * (suite.runs ? describe : describe.skip)(suite.title, () => { ... });
 * ```
 */
export { testbedSuite, type TestbedSuite } from "./testbed-suite";
