/**
 * The behaviour every {@link CertificateKv} must have, as checks that any
 * test runner can run: pki runs them against `MemoryCertificateKv`,
 * consensus against etcd, so the in-memory adapter pki's tests rely on is
 * held to what etcd does. A check throws (node:assert) when the adapter
 * breaks the contract.
 */
import { deepStrictEqual, notStrictEqual, strictEqual } from "node:assert/strict";
import type { CertificateKv, StoredValue } from "./certificate-kv";

/**
 * Two handles on one fresh, empty storage, as two nodes have (for etcd: two
 * clients on the same namespace; in memory: the same map).
 */
export type OpenCertificateKv = () => Promise<readonly [CertificateKv, CertificateKv]>;

/** One named check of the contract. */
export interface CertificateKvCheck {
  /** What the check shows, as a test name. */
  readonly name: string;
  /** Runs the check on a storage `open` makes; rejects when the adapter fails it. */
  run(open: OpenCertificateKv): Promise<void>;
}

/** How many writers the race checks start at once. */
const RACERS = 8;

const bytes = (text: string): Buffer => Buffer.from(text);

function valueOf(stored: StoredValue | null): Buffer | null {
  return stored === null ? null : stored.value;
}

async function revisionOf(kv: CertificateKv, key: string): Promise<string> {
  const [stored] = await kv.read([key]);
  notStrictEqual(stored, null, `${key} should exist`);
  return stored?.revision ?? "";
}

/** The checks, in a fixed order. */
export function certificateKvContract(): readonly CertificateKvCheck[] {
  return [
    {
      name: "read returns null for absent keys and the bytes written, on every handle",
      async run(open) {
        const [a, b] = await open();
        const binary = Buffer.from([0, 255, 10, 13, 0x80, 0]);
        strictEqual(
          await a.createAll(
            ["x"],
            [
              ["x", binary],
              ["y/z", bytes("")],
            ],
          ),
          true,
        );
        for (const kv of [a, b]) {
          const [x, y, missing] = await kv.read(["x", "y/z", "absent"]);
          deepStrictEqual(valueOf(x), binary);
          deepStrictEqual(valueOf(y), bytes(""));
          strictEqual(missing, null);
        }
      },
    },
    {
      name: "values read are copies: changing one changes nothing stored",
      async run(open) {
        const [a, b] = await open();
        await a.createAll(["x"], [["x", bytes("value")]]);
        const [read] = await a.read(["x"]);
        read?.value.fill(0);
        const [again] = await b.read(["x"]);
        deepStrictEqual(valueOf(again), bytes("value"));
      },
    },
    {
      name: "createAll writes nothing when one guarded key exists, not even its other puts",
      async run(open) {
        const [a, b] = await open();
        strictEqual(await a.createAll(["taken"], [["taken", bytes("first")]]), true);
        strictEqual(
          await b.createAll(
            ["free", "taken"],
            [
              ["free", bytes("second")],
              ["taken", bytes("second")],
              ["other", bytes("second")],
            ],
          ),
          false,
        );
        const [free, taken, other] = await a.read(["free", "taken", "other"]);
        strictEqual(free, null);
        deepStrictEqual(valueOf(taken), bytes("first"));
        strictEqual(other, null);
      },
    },
    {
      name: "createAll guards only the keys it names: an unguarded put overwrites",
      async run(open) {
        const [a, b] = await open();
        await a.createAll(["companion"], [["companion", bytes("old")]]);
        strictEqual(
          await b.createAll(
            ["new"],
            [
              ["new", bytes("n")],
              ["companion", bytes("replaced")],
            ],
          ),
          true,
        );
        const [created, companion] = await a.read(["new", "companion"]);
        deepStrictEqual(valueOf(created), bytes("n"));
        deepStrictEqual(valueOf(companion), bytes("replaced"));
      },
    },
    {
      name: "of concurrent createAlls guarding one key, exactly one commits, all its puts",
      async run(open) {
        const handles = await open();
        const outcomes = await Promise.all(
          Array.from({ length: RACERS }, (_, i) =>
            handles[i % 2 === 0 ? 0 : 1].createAll(
              ["certificate", "key"],
              [
                ["certificate", bytes(`certificate ${i}`)],
                ["key", bytes(`key ${i}`)],
              ],
            ),
          ),
        );
        const winners = outcomes.flatMap((committed, i) => (committed ? [i] : []));
        strictEqual(winners.length, 1, `winners: ${winners.join(", ")}`);
        const [certificate, key] = await handles[0].read(["certificate", "key"]);
        deepStrictEqual(valueOf(certificate), bytes(`certificate ${winners[0]}`));
        deepStrictEqual(valueOf(key), bytes(`key ${winners[0]}`));
      },
    },
    {
      name: "replace writes only at the revision read, and every write changes the revision",
      async run(open) {
        const [a, b] = await open();
        await a.createAll(["crl"], [["crl", bytes("v1")]]);
        const first = await revisionOf(a, "crl");
        strictEqual(await b.replace("crl", first, bytes("v2")), true);
        const second = await revisionOf(b, "crl");
        notStrictEqual(second, first);
        strictEqual(await a.replace("crl", first, bytes("stale")), false);
        deepStrictEqual(valueOf((await a.read(["crl"]))[0]), bytes("v2"));
        // The same bytes again are a write too: the revision moves on.
        strictEqual(await a.replace("crl", second, bytes("v2")), true);
        const third = await revisionOf(a, "crl");
        notStrictEqual(third, second);
        strictEqual(await b.replace("crl", second, bytes("v3")), false);
      },
    },
    {
      name: "replace does not create a key that does not exist",
      async run(open) {
        const [a] = await open();
        await a.createAll(["present"], [["present", bytes("p")]]);
        const revision = await revisionOf(a, "present");
        strictEqual(await a.replace("missing", revision, bytes("m")), false);
        strictEqual((await a.read(["missing"]))[0], null);
      },
    },
    {
      name: "of concurrent replaces from one revision, exactly one commits",
      async run(open) {
        const handles = await open();
        await handles[0].createAll(["crl"], [["crl", bytes("start")]]);
        const revision = await revisionOf(handles[0], "crl");
        const outcomes = await Promise.all(
          Array.from({ length: RACERS }, (_, i) =>
            handles[i % 2 === 0 ? 0 : 1].replace("crl", revision, bytes(`crl ${i}`)),
          ),
        );
        const winners = outcomes.flatMap((committed, i) => (committed ? [i] : []));
        strictEqual(winners.length, 1, `winners: ${winners.join(", ")}`);
        deepStrictEqual(valueOf((await handles[1].read(["crl"]))[0]), bytes(`crl ${winners[0]}`));
      },
    },
    {
      name: "a read racing a createAll sees all of its puts or none",
      async run(open) {
        const [a, b] = await open();
        const reads = Array.from({ length: RACERS }, () => b.read(["one", "two"]));
        const write = a.createAll(
          ["one"],
          [
            ["one", bytes("1")],
            ["two", bytes("2")],
          ],
        );
        for (const [one, two] of [...(await Promise.all(reads)), await b.read(["one", "two"])]) {
          strictEqual(one === null, two === null, "a read saw half of one createAll");
        }
        strictEqual(await write, true);
      },
    },
  ];
}
