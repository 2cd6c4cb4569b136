/**
 * The rule for a runnable's status text (`RunContext.status`): one short
 * line. It is drawn in one cell of a table (`metroctl tree`, the observer's
 * tree) and sent to every watcher of the tree on every change, so the tree
 * keeps it bounded and on one line whatever a runnable passes: a line break
 * in it would tear the table apart, and a status the size of a document would
 * be copied into every snapshot of the tree.
 */

/** The most characters (UTF-16 code units) a status keeps; a longer one is cut, ending in "…". */
export const maxStatusLength = 120;

const controlCharacters = /\p{Cc}+/gu;

/**
 * `text` as the tree keeps it: every run of control characters (line breaks,
 * tabs) made one space, trimmed, and cut to {@link maxStatusLength} with a
 * final "…" (never splitting a surrogate pair). "" means no status.
 */
export function statusText(text: string): string {
  const line = text.replace(controlCharacters, " ").trim();
  if (line.length <= maxStatusLength) return line;
  let end = maxStatusLength - 1;
  const last = line.charCodeAt(end - 1);
  // A high surrogate whose low half would be cut off goes too.
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${line.slice(0, end)}…`;
}
