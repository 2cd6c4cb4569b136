/**
 * The "trapdoor" message: when `metropolis-node` cannot start at all (e.g.
 * enrolment failed in a way no retry will fix), it prints one boxed message
 * saying so, and why, instead of leaving an operator to dig the reason out of
 * a scroll of log lines. Monogon's node does the same on its console before
 * it halts.
 *
 *   ┌────────────────────────────────────────────────────────────────────────────┐
 *   │ metropolis-node cannot start                                               │
 *   ├────────────────────────────────────────────────────────────────────────────┤
 *   │ Registering with the cluster failed.                                       │
 *   │                                                                            │
 *   │ RegisterError: ticket rejected                                             │
 *   │ caused by: PERMISSION_DENIED: …                                            │
 *   └────────────────────────────────────────────────────────────────────────────┘
 */

/** Width of the box, borders included: it fits an 80-column console. */
export const fatalWidth = 78;

/** Causes followed at most, in case a chain is absurdly long. */
const maxCauses = 16;

/** Text columns inside the box: the width less two borders and two spaces of padding. */
const textWidth = fatalWidth - 4;

/** `Name: message` of one link of a cause chain (just the message for a plain Error). */
function describe(e: unknown): string {
  if (e instanceof Error) {
    const message = e.message || "(no message)";
    return e.name && e.name !== "Error" ? `${e.name}: ${message}` : message;
  }
  if (typeof e === "string") return e;
  try {
    return JSON.stringify(e) ?? String(e);
  } catch {
    return String(e);
  }
}

/** The messages of `cause` and of each `cause` below it, outermost first; cycles are cut. */
export function causeChain(cause: unknown): string[] {
  const out: string[] = [];
  const seen = new Set<unknown>();
  let e: unknown = cause;
  while (e !== undefined && e !== null && !seen.has(e) && out.length < maxCauses) {
    seen.add(e);
    out.push(describe(e));
    e = e instanceof Error ? e.cause : undefined;
  }
  return out;
}

/**
 * Wraps `text` at `width` columns (code points), at spaces where it can,
 * breaking words longer than a line. Newlines in `text` are kept; every line
 * but the first starts with `indent`.
 */
function wrap(text: string, width: number, indent = ""): string[] {
  const lines: string[] = [];
  let line: string[] = [];
  let empty = true;
  const emit = () => {
    lines.push(line.join(""));
    line = Array.from(indent);
    empty = true;
  };
  text.split("\n").forEach((paragraph, p) => {
    if (p > 0) emit();
    for (const word of paragraph.split(/\s+/).filter((w) => w !== "")) {
      let rest = Array.from(word);
      const gap = empty ? 0 : 1;
      if (line.length + gap + rest.length > width && !empty) emit();
      else if (gap) line.push(" ");
      // A word longer than a whole line is broken wherever the line ends.
      while (line.length + rest.length > width) {
        const room = Math.max(1, width - line.length);
        line.push(...rest.slice(0, room));
        rest = rest.slice(room);
        emit();
      }
      line.push(...rest);
      empty = false;
    }
  });
  lines.push(line.join(""));
  return lines;
}

/**
 * One boxed message saying that metropolis-node cannot start (or, with
 * `headline`, what else ended it): the headline, `title`, then the messages
 * of `cause` and its chain of causes, each wrapped to fit. Every line is
 * exactly {@link fatalWidth} columns wide.
 *
 * @example
 * process.stderr.write(formatFatal("Registering with the cluster failed.", err) + "\n");
 */
export function formatFatal(
  title: string,
  cause: unknown,
  headline = "metropolis-node cannot start",
): string {
  const horizontal = "─".repeat(fatalWidth - 2);
  const row = (text: string) =>
    `│ ${text}${" ".repeat(Math.max(0, textWidth - Array.from(text).length))} │`;
  const body = wrap(title, textWidth);
  const causes = causeChain(cause);
  if (causes.length > 0) body.push("");
  causes.forEach((message, i) =>
    body.push(...wrap(i === 0 ? message : `caused by: ${message}`, textWidth, i === 0 ? "" : "  ")),
  );
  return [
    `┌${horizontal}┐`,
    row(headline),
    `├${horizontal}┤`,
    ...body.map(row),
    `└${horizontal}┘`,
  ].join("\n");
}
