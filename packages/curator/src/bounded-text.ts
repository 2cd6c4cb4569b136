/**
 * Client-supplied text in error messages, bounded.
 *
 * A gRPC status message travels in an HTTP/2 header (`grpc-message`). An
 * error that echoed a client's value in full — a 200 KiB label key, a node
 * ID of a megabyte — made a header larger than either side accepts: the call
 * then hung without a status until its deadline, and the connection with it.
 * The same messages end up in logs. So an error message that names a value a
 * client sent quotes it with {@link quoted}, and one that embeds another
 * error's message about client input (a certificate's subject, say) passes
 * that message through {@link clipped}. Neither lets control characters
 * through, so no client can forge a log line either.
 */

/** Characters of a client's value an error message quotes at most. */
export const maxQuotedLength = 64;

/** Characters of an embedded message that may carry client input, at most. */
export const maxClippedLength = 512;

/**
 * `value` as an error message should quote it: JSON-quoted when it is at
 * most {@link maxQuotedLength} characters long, otherwise its first
 * {@link maxQuotedLength} characters, quoted, then `...` and its full length.
 *
 * @example
 * quoted("zone"); // "zone" (with the quotes)
 * quoted("k".repeat(100_000)); // "kk…k"... (100000 characters), 64 k's quoted
 */
export function quoted(value: string): string {
  if (value.length <= maxQuotedLength) return JSON.stringify(value);
  return `${JSON.stringify(value.slice(0, maxQuotedLength))}... (${value.length} characters)`;
}

/**
 * `text` (a message, not a value: it is not quoted) cut to
 * {@link maxClippedLength} characters, with `...` and its full length when
 * cut, and its control characters escaped as `\uXXXX`.
 */
export function clipped(text: string): string {
  const cut =
    text.length <= maxClippedLength
      ? text
      : `${text.slice(0, maxClippedLength)}... (${text.length} characters)`;
  return cut.replace(
    // eslint-disable-next-line no-control-regex
    /[\u0000-\u001f\u007f]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}
