/**
 * WipeAcknowledgements, which DecommissionNode with `wipe` waits on before
 * it revokes the node's certificate: an acknowledgement wakes the wait (or
 * was there already), a node that never acknowledges is given up after the
 * timeout (false, not an error), the call's abort ends the wait with its
 * reason, and a forgotten node's acknowledgement is gone. Recording one
 * writes the node's record once however many heartbeats repeat it, wakes
 * the wait only once the record holds it, and tries again after a failed
 * write. The wait and the record on a real curator are in roleserve's wipe
 * test (also a new leader answering from the record) and e2e/decommission-wipe.
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

it("records an acknowledgement with one write, and wakes the wait once the record holds it", async () => {
  const acks = new WipeAcknowledgements();
  const waiting = acks.wait(node, 60_000, new AbortController().signal);
  let commit: ((held: boolean) => void) | undefined;
  const write = jest.fn(
    () =>
      new Promise<boolean>((resolve) => {
        commit = resolve;
      }),
  );
  const first = acks.record(node, write);
  // A repeated acknowledgement joins the write under way.
  const second = acks.record(node, write);
  expect(write).toHaveBeenCalledTimes(1);
  expect(acks.has(node)).toBe(false);
  if (commit === undefined) throw new Error("the write was not started");
  commit(true);
  await expect(Promise.all([first, second])).resolves.toEqual([true, true]);
  await expect(waiting).resolves.toBe(true);
  // Recorded by this leader: no further write.
  await expect(acks.record(node, write)).resolves.toBe(true);
  expect(write).toHaveBeenCalledTimes(1);
});

it("wakes no wait for a record that does not hold it, and writes again after a failure", async () => {
  const acks = new WipeAcknowledgements();
  await expect(acks.record(node, async () => false)).resolves.toBe(false);
  expect(acks.has(node)).toBe(false);
  await expect(acks.wait(node, 10, new AbortController().signal)).resolves.toBe(false);
  await expect(
    acks.record(node, async () => {
      throw new Error("not the leader");
    }),
  ).rejects.toThrow("not the leader");
  await expect(acks.record(node, async () => true)).resolves.toBe(true);
  expect(acks.has(node)).toBe(true);
});
