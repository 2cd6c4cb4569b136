/**
 * Random loopback networks, so that clusters that run at the same time (e2e
 * test files in parallel, a chaos run) never share an address: each takes a
 * random 127.X.Y.0/24 of its own.
 */
import { randomInt } from "node:crypto";

/** A random 127.X.Y.0/24; node `i` (1-based) gets 127.X.Y.(i+1). */
export function randomLoopbackNet(): (index: number) => string {
  const prefix = `127.${randomInt(100, 250)}.${randomInt(1, 250)}`;
  return (index) => `${prefix}.${index + 1}`;
}
