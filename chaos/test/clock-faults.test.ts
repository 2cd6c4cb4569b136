/**
 * The clock faults' offset files, without a cluster: concurrent writes of
 * one node's offset (a strobe and a restart at once) all succeed and leave
 * the last offset asked for — seed 23 of the first testbed runs lost a
 * node's restart to two writes sharing one temporary file; and a node's
 * environment preloads libfaketime reading its own file, re-read on every
 * call, with the monotonic clock left alone; libfaketime's shared memory
 * and semaphore of the run's node PIDs are removed, nobody else's.
 */
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ClusterNode } from "@metropolis/local-cluster";
import { ClockControl, libfaketimePath, removeFaketimeLeftovers } from "../src/clock-faults";

const node: ClusterNode = {
  index: 5,
  name: "node5",
  address: "198.18.0.6",
  root: "/nowhere",
  id: "n5",
};

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "chaos-clock-"));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("ClockControl", () => {
  it("writes one node's offsets in order, however many at once, and leaves no temporary file", async () => {
    const clock = new ClockControl(dir);
    const offsets = Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? 0 : -60 + i / 10));
    await Promise.all(offsets.map((o) => clock.set(node, o)));
    expect(await readFile(clock.file(node), "utf8")).toBe(`${offsets.at(-1)?.toFixed(3)}\n`);
    expect(await readdir(dir)).toEqual(["node5.faketime"]);
    expect(clock.offset(node)).toBe(offsets.at(-1));
    await clock.reset([node]);
    expect(await readFile(clock.file(node), "utf8")).toBe("+0.000\n");
  });

  it("gives a node libfaketime reading its own file on every call, the monotonic clock left alone", () => {
    const clock = new ClockControl(dir);
    expect(clock.environment(node)).toEqual({
      LD_PRELOAD: libfaketimePath,
      FAKETIME_TIMESTAMP_FILE: join(dir, "node5.faketime"),
      FAKETIME_NO_CACHE: "1",
      FAKETIME_DONT_FAKE_MONOTONIC: "1",
    });
  });

  it("removes libfaketime's leftovers of the PIDs given, and only those", async () => {
    for (const name of [
      "faketime_shm_101",
      "sem.faketime_sem_101",
      "faketime_shm_102",
      "faketime_shm_999",
      "sem.faketime_sem_999",
    ]) {
      await writeFile(join(dir, name), "");
    }
    expect(await removeFaketimeLeftovers([101, 102, 103, 101], dir)).toBe(3);
    expect((await readdir(dir)).sort()).toEqual(["faketime_shm_999", "sem.faketime_sem_999"]);
  });
});
