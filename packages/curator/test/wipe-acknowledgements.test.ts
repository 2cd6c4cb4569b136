/**
 * WipeAcknowledgements, which DecommissionNode with `wipe` waits on before
 * it revokes the node's certificate: an acknowledgement wakes the wait (or
 * was there already), a node that never acknowledges is given up after the
 * timeout (false, not an error), the call's abort ends the wait with its
 * reason, and a forgotten node's acknowledgement is gone. The wait on a
 * real curator is in roleserve's wipe test and e2e/decommission-wipe.
 */
import { WipeAcknowledgements } from "../src/wipe-acknowledgements";

const node = "metropolis-00000000000000000000000000000001";
const other = "metropolis-00000000000000000000000000000002";

it("wakes a wait when the node acknowledges, and only for that node", async () => {
  const acks = new WipeAcknowledgements();
  const waiting = acks.wait(node, 60_000, new AbortController().signal);
  acks.acknowledge(other);
  expect(acks.has(node)).toBe(false);
  acks.acknowledge(node);
  await expect(waiting).resolves.toBe(true);
  // Already there: at once.
  await expect(acks.wait(node, 60_000, new AbortController().signal)).resolves.toBe(true);
});

it("gives a node that does not acknowledge up after the timeout", async () => {
  const acks = new WipeAcknowledgements();
  await expect(acks.wait(node, 10, new AbortController().signal)).resolves.toBe(false);
  // A later acknowledgement is kept for the next wait.
  acks.acknowledge(node);
  expect(acks.has(node)).toBe(true);
});

it("ends the wait with the signal's reason, and forgets a node", async () => {
  const acks = new WipeAcknowledgements();
  const abort = new AbortController();
  const waiting = acks.wait(node, 60_000, abort.signal);
  abort.abort(new Error("the call was cancelled"));
  await expect(waiting).rejects.toThrow("the call was cancelled");
  await expect(acks.wait(node, 60_000, abort.signal)).rejects.toThrow("the call was cancelled");
  acks.acknowledge(node);
  acks.forget(node);
  expect(acks.has(node)).toBe(false);
});
