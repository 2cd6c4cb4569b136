/**
 * fast-check building blocks for fuzzing the gRPC services: field values
 * that are valid, almost valid and wildly invalid (huge, unicode, lone
 * surrogates, control characters, wrong lengths, unknown enum values, odd
 * label keys), and raw request bytes (noise, well-formed protobuf of random
 * fields, sizes around the server's message limit).
 *
 * Large values are made by repeating a small generated pattern, so that
 * generating them stays cheap and a failing case replays from its seed.
 */
import fc from "fast-check";
import { maxRequestBytes } from "../src/server-limits";

/** `pattern` repeated to exactly `length` bytes. */
function repeatBytes(pattern: Uint8Array, length: number): Buffer {
  const out = Buffer.alloc(length);
  for (let i = 0; i < length; i += pattern.length) out.set(pattern.subarray(0, length - i), i);
  return out;
}

/** A size near the server's message limit: just below, at, or just above it. */
export const nearLimit = fc.integer({ min: maxRequestBytes - 2048, max: maxRequestBytes + 2048 });

/** Strings: short ASCII, unicode, any UTF-16 code unit (lone surrogates, NUL), and huge ones. */
export const text: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 3, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
  {
    weight: 2,
    arbitrary: fc.string({
      unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
      maxLength: 40,
    }),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.string({ unit: "binary", minLength: 1, maxLength: 8 }),
        fc.oneof(fc.integer({ min: 64, max: 70_000 }), nearLimit),
      )
      .map(([pattern, length]) =>
        pattern.repeat(Math.ceil(length / pattern.length)).slice(0, length),
      ),
  },
);

/** Byte fields: empty, short, exactly or almost 32 bytes (keys), and huge. */
export const bytes: fc.Arbitrary<Buffer> = fc.oneof(
  { weight: 3, arbitrary: fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b)) },
  {
    weight: 3,
    arbitrary: fc
      .constantFrom(0, 1, 16, 31, 32, 33, 64)
      .chain((n) => fc.uint8Array({ minLength: n, maxLength: n }))
      .map((b) => Buffer.from(b)),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.uint8Array({ minLength: 1, maxLength: 16 }), fc.oneof(fc.nat(70_000), nearLimit))
      .map(([pattern, length]) => repeatBytes(pattern, length)),
  },
);

/** A well-formed node ID that belongs to no node. */
export const unknownNodeId = fc
  .uint8Array({ minLength: 16, maxLength: 16 })
  .map((b) => `metropolis-${Buffer.from(b).toString("hex")}`);

/** Node IDs: `known` ones, unknown well-formed ones, almost-IDs, and any text. */
export function nodeId(known: readonly string[]): fc.Arbitrary<string> {
  const almost = fc.oneof(
    unknownNodeId.map((id) => id.toUpperCase()),
    unknownNodeId.map((id) => id.slice(0, -1)),
    unknownNodeId.map((id) => `${id}0`),
    unknownNodeId.map((id) => ` ${id}`),
    unknownNodeId.map((id) => id.replace("metropolis-", "metropolis_")),
    fc.constant("metropolis-"),
    fc.constant(""),
  );
  return fc.oneof(
    ...(known.length > 0 ? [{ weight: 3, arbitrary: fc.constantFrom(...known) }] : []),
    { weight: 2, arbitrary: unknownNodeId },
    { weight: 2, arbitrary: almost },
    { weight: 1, arbitrary: text },
  );
}

/** Values of an enum: its own (`values`), and any other 32-bit integer. */
export function enumValue(values: readonly number[]): fc.Arbitrary<number> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...values) },
    { weight: 1, arbitrary: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }) },
  );
}

/** Label keys and values of Kubernetes' shape, and keys that trip up JavaScript objects or validators. */
/** A valid label name or value (and key, without a prefix). */
export const validName = fc.stringMatching(/^[a-z0-9]([a-z0-9._-]{0,20}[a-z0-9])?$/);
const oddKey = fc.constantFrom(
  "__proto__",
  "constructor",
  "prototype",
  "hasOwnProperty",
  "toString",
  "",
  "/",
  "a/",
  "/a",
  "a/b/c",
  "-a",
  "a-",
  "A.B/c",
  "example.com/" + "x".repeat(64),
  "x".repeat(64),
  "x".repeat(254) + "/a",
  "ünïcödé",
  "k\u0000",
  "k\n",
  "\ud800",
);
export const labelKey: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: validName },
  { weight: 2, arbitrary: fc.tuple(validName, validName).map(([p, n]) => `${p}/${n}`) },
  { weight: 2, arbitrary: oddKey },
  { weight: 1, arbitrary: text },
);
export const labelValue: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: validName },
  { weight: 1, arbitrary: fc.constant("") },
  { weight: 1, arbitrary: text },
);

/** A few valid labels. */
export const validLabels = fc.map(validName, validName, { maxKeys: 8 });

/** Label maps: none, a few (valid or odd), and more than a node may have. */
export const labels: fc.Arbitrary<Map<string, string>> = fc.oneof(
  { weight: 2, arbitrary: fc.constant(new Map<string, string>()) },
  { weight: 2, arbitrary: validLabels },
  { weight: 4, arbitrary: fc.map(labelKey, labelValue, { maxKeys: 8 }) },
  { weight: 1, arbitrary: fc.map(validName, validName, { minKeys: 120, maxKeys: 140 }) },
);

/** One protobuf field on the wire: any field number, any wire type, a fitting (or not) value. */
const wireField: fc.Arbitrary<Buffer> = fc
  .tuple(
    fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 2 ** 29 - 1 })),
    fc.oneof(
      fc.record({ type: fc.constant(0), value: fc.bigInt(0n, 2n ** 64n - 1n) }),
      fc.record({ type: fc.constant(1), value: fc.uint8Array({ minLength: 8, maxLength: 8 }) }),
      fc.record({ type: fc.constant(2), value: fc.uint8Array({ maxLength: 64 }) }),
      fc.record({ type: fc.constant(5), value: fc.uint8Array({ minLength: 4, maxLength: 4 }) }),
      // Groups (deprecated) and the invalid wire types 6 and 7.
      fc.record({ type: fc.constantFrom(3, 4, 6, 7), value: fc.constant(new Uint8Array()) }),
    ),
  )
  .map(([field, { type, value }]) => {
    const tag = varint(BigInt(field) * 8n + BigInt(type));
    if (typeof value === "bigint") return Buffer.concat([tag, varint(value)]);
    if (type === 2) return Buffer.concat([tag, varint(BigInt(value.length)), value]);
    return Buffer.concat([tag, value]);
  });

function varint(n: bigint): Buffer {
  const out: number[] = [];
  do {
    let byte = Number(n & 0x7fn);
    n >>= 7n;
    if (n > 0n) byte |= 0x80;
    out.push(byte);
  } while (n > 0n);
  return Buffer.from(out);
}

/**
 * Raw request bytes: noise, well-formed protobuf of random fields, and
 * patterns of sizes around the server's message limit (above it, the server
 * must refuse them with RESOURCE_EXHAUSTED before decoding).
 */
export const rawRequest: fc.Arbitrary<Buffer> = fc.oneof(
  { weight: 3, arbitrary: fc.uint8Array({ maxLength: 256 }).map((b) => Buffer.from(b)) },
  { weight: 3, arbitrary: fc.array(wireField, { maxLength: 12 }).map((f) => Buffer.concat(f)) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.uint8Array({ minLength: 1, maxLength: 64 }), nearLimit)
      .map(([pattern, length]) => repeatBytes(pattern, length)),
  },
);
