/**
 * memberSocketPath: an etcd member's client socket path is refused, naming
 * it, when it is longer than a unix socket's path may be (Linux's sun_path),
 * instead of a connect that silently goes nowhere.
 */
import { ConsensusConfigError } from "../src/errors";
import { maxSocketPathBytes, memberSocketPath } from "../src/member-socket";

/** A directory whose path makes `dir/name` exactly `bytes` long. */
const dirFor = (name: string, bytes: number) => "/" + "d".repeat(bytes - name.length - 2);

it("accepts a path of the longest length a unix socket's may have", () => {
  const dir = dirFor("client.sock:0", maxSocketPathBytes);
  expect(memberSocketPath(dir, "client.sock:0")).toBe(`${dir}/client.sock:0`);
  expect(Buffer.byteLength(memberSocketPath(dir, "client.sock:0"))).toBe(107);
});

it("refuses one byte more, naming the path, its length, the limit and what to do", () => {
  const dir = dirFor("client.sock:0", maxSocketPathBytes + 1);
  const refused = () => memberSocketPath(dir, "client.sock:0");
  expect(refused).toThrow(ConsensusConfigError);
  expect(refused).toThrow(`"${dir}/client.sock:0" is 108 bytes long`);
  expect(refused).toThrow(/may be at most 107: give the node a shorter --root/);
});

it("counts bytes, not characters", () => {
  // 52 two-byte characters: 119 bytes in all, but 67 characters.
  expect(() => memberSocketPath("/" + "é".repeat(52), "client.sock:0")).toThrow(/119 bytes long/);
});
