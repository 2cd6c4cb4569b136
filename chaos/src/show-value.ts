/**
 * How a register's value is written in the checker's messages: a string in
 * JSON quotes, `absent` for `null` (the label was not set).
 */

/** A register's value for a message. */
export function showValue(value: string | null): string {
  return value === null ? "absent" : JSON.stringify(value);
}
