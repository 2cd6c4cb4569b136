/**
 * A codec for files that hold one protobuf message (`parameters.pb`,
 * `cluster_directory.pb`, `roles.pb`), from a ts-proto message type.
 */
import type { Codec } from "./tree";

/** The part of a ts-proto generated message type a codec needs. */
export interface MessageType<T> {
  encode(message: T): { finish(): Uint8Array };
  decode(bytes: Uint8Array): T;
}

/**
 * Reads and writes `type`. Bytes that do not parse as the message (truncated,
 * garbage, a wrong wire type) make `read()` fail with `FileCorruptedError`;
 * an empty file is refused too, since it would silently decode to a message
 * with every field unset.
 */
export function protobufCodec<T>(type: MessageType<T>): Codec<T> {
  return {
    decode(bytes) {
      if (bytes.length === 0) throw new Error("the file is empty");
      return type.decode(bytes);
    },
    encode: (value) => type.encode(value).finish(),
  };
}
