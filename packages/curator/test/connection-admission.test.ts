/**
 * ConnectionAdmission lets a few connections in per turn of the event loop,
 * none while the loop runs late, in the order they came, and keeps no more
 * than its bound waiting.
 */
import { Socket } from "node:net";
import { eventually } from "@metropolis/supervisor/testing";
import { ConnectionAdmission } from "../src/connection-admission";

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe("ConnectionAdmission", () => {
  it("admits at most perTurn connections per turn of the event loop, oldest first", async () => {
    const admitted: Socket[] = [];
    // No lag pause: this test is about the per-turn count, and a loaded machine
    // (a full test run) made the first turn late enough to pause admission.
    const admission = new ConnectionAdmission((s) => admitted.push(s), {
      perTurn: 3,
      maxLagMs: Infinity,
    });
    const sockets = Array.from({ length: 10 }, () => new Socket());
    for (const s of sockets) admission.offer(s);
    expect(admitted).toHaveLength(0);
    await turn();
    expect(admitted).toHaveLength(3);
    await eventually(() => admitted.length === 10, "all admitted");
    expect(admitted).toEqual(sockets);
    admission.close();
  });

  it("admits nothing while the event loop runs late", async () => {
    const admitted: Socket[] = [];
    const admission = new ConnectionAdmission((s) => admitted.push(s), { maxLagMs: 30 });
    admission.offer(new Socket());
    // A turn of the loop that takes 150 ms: the lag probe sees it before the pump runs.
    const until = performance.now() + 150;
    while (performance.now() < until);
    await turn();
    expect(admitted).toHaveLength(0);
    await eventually(() => admitted.length === 1, "admitted once the loop caught up");
    admission.close();
  });

  it("closes the oldest waiting connection past maxWaiting, and every one on close()", () => {
    const admission = new ConnectionAdmission(() => undefined, { maxWaiting: 2 });
    const sockets = Array.from({ length: 3 }, () => new Socket());
    for (const s of sockets) admission.offer(s);
    expect(sockets.map((s) => s.destroyed)).toEqual([true, false, false]);
    expect(admission.size).toBe(2);
    admission.close();
    expect(sockets.every((s) => s.destroyed)).toBe(true);
    const late = new Socket();
    admission.offer(late);
    expect(late.destroyed).toBe(true);
  });
});
