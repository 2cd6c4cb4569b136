/**
 * At most one curator serves as the leader at any instant: the check of a
 * run's leader observations (history.ts `LeaderObservation`), pure, from
 * client-observed intervals alone.
 *
 * What an observation proves: a call invoked at `a` and answered at `b`
 * (the chaos process's monotonic clock) shows that the curator acted as the
 * leader at *some* instant inside [a, b] — not when, and not for how long.
 * Two overlapping intervals of two curators therefore prove nothing: each
 * may have served at a different instant of the overlap. What does prove
 * something is order: an answer that *returned* before another call was
 * *invoked* happened before it.
 *
 * Terms: a curator leads while its election key is the one with the lowest
 * etcd create revision among the candidates' keys; that revision is its
 * term (GetClusterConsensus answers it). Keys are never re-created with an
 * old revision, so a leadership of term T2 exists only once every key of a
 * lower term is gone: its lease expired or was revoked, or it was deleted
 * by its holder stepping down. From then on no leadership of a lower term
 * may serve again — that is exactly what the curator's lease deadline is
 * for. Two rules follow, each certain (no false alarm whatever the
 * scheduling and network delays):
 *
 * 1. `older-term-after-newer`: a serve of term T1 *invoked after* a serve of
 *    a term T2 > T1 had *returned*. The T2 serve happened at s2 ≤ its
 *    return < the T1 call's invocation ≤ s1: term T1 served after T2 was
 *    elected, i.e. after T1's key was gone — two leaderships acting at once
 *    in the sense of fencing (Kleppmann): the old one did not know it was
 *    over.
 * 2. `between-serves-of-another`: curator X acted as the leader in a call
 *    [a, b] whose answer carries no term (a GetNodes read, a write,
 *    GetCurrentLeader naming itself) while another curator Y's term T served
 *    in a call that returned before `a` and in a call invoked after `b`.
 *    Whatever X's unknown term T' was: if T' < T, X acted after T existed;
 *    if T' > T, Y's later serve of T came after T' existed. Either way two
 *    leaderships overlapped. (With a term on both sides rule 1 decides.)
 *    This is the rule that catches a cut-off old leader answering reads
 *    from memory: its GetClusterConsensus needs etcd and stalls, its
 *    GetNodes and GetCurrentLeader do not.
 *
 * Each anomaly carries the window [invokedAt, completedAt] of the
 * observation that was out of place (the second leader acted in it), and
 * the observations that prove it. Anomalies of the same pair of
 * leaderships are reported once with a count; `moments` merges their
 * windows, and windows less than {@link momentGapMs} apart: how many
 * separate stretches of time had two leaders (one cut-off leader answering
 * every probe for two seconds is one moment, not twenty).
 */
import type { LeaderObservation, Operation } from "./history";

/** Windows of anomalies closer than this are one moment. */
export const momentGapMs = 1000;

/** Which of the module comment's rules found an anomaly. */
export type LeaderRule = "older-term-after-newer" | "between-serves-of-another";

/** Two curators acting as the leader at once; see the module comment. */
export interface LeaderAnomaly {
  kind: "two-serving-leaders";
  rule: LeaderRule;
  /** What happened, with the curators, terms and times. */
  message: string;
  /** The window (run clock, ms) in which the out-of-place leader acted. */
  from: number;
  to: number;
  /** The observations that prove it: the out-of-place one first. */
  observations: LeaderObservation[];
  /** How many observations showed the same pair of leaderships. */
  count: number;
}

/** What {@link checkLeaders} found. */
export interface LeaderCheck {
  anomalies: LeaderAnomaly[];
  /** Separate stretches of time (merged windows) with two leaders acting. */
  moments: Array<{ from: number; to: number }>;
  /** Observations checked, by kind. */
  serves: number;
  claims: number;
  /** Distinct (curator, term) leaderships seen serving. */
  terms: Array<{ curator: string; term: number; first: number; last: number }>;
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(3)} s`;

function describe(o: LeaderObservation): string {
  const term = o.term === undefined ? "" : ` (term ${o.term})`;
  const what = o.kind === "claim" ? `named itself leader (${o.call})` : `served ${o.call}`;
  return `${o.curator}${term} ${what} in [${seconds(o.invokedAt)}, ${seconds(o.completedAt)}]`;
}

/** A serve of a known term. */
type TermServe = LeaderObservation & { kind: "serve"; term: number };

function hasTerm(o: LeaderObservation): o is TermServe {
  return o.kind === "serve" && o.term !== undefined;
}

/** Checks that at most one curator acted as the leader at any instant; see the module comment. */
export function checkLeaders(observations: readonly LeaderObservation[]): LeaderCheck {
  const found = new Map<string, LeaderAnomaly>();
  const windows: Array<{ from: number; to: number }> = [];
  const add = (key: string, anomaly: Omit<LeaderAnomaly, "count" | "kind">): void => {
    windows.push({ from: anomaly.from, to: anomaly.to });
    const seen = found.get(key);
    if (seen) seen.count += 1;
    else found.set(key, { kind: "two-serving-leaders", ...anomaly, count: 1 });
  };

  // Rule 1: term serves by completion, with the highest term returned so far.
  const termServes = observations.filter(hasTerm);
  const byCompletion = [...termServes].sort((a, b) => a.completedAt - b.completedAt);
  const newestSoFar: TermServe[] = [];
  for (const serve of byCompletion) {
    const previous = newestSoFar.at(-1);
    newestSoFar.push(previous !== undefined && previous.term >= serve.term ? previous : serve);
  }
  /** The serve of the highest term that returned before `t`. */
  const newestBefore = (t: number): TermServe | undefined => {
    let lo = 0;
    let hi = byCompletion.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (byCompletion[mid].completedAt < t) lo = mid + 1;
      else hi = mid;
    }
    return lo === 0 ? undefined : newestSoFar[lo - 1];
  };
  for (const serve of termServes) {
    const newer = newestBefore(serve.invokedAt);
    if (newer === undefined || newer.term <= serve.term) continue;
    add(`1:${serve.curator}:${serve.term}:${newer.term}`, {
      rule: "older-term-after-newer",
      message:
        `${describe(serve)}, invoked after ${describe(newer)} had returned: ` +
        `term ${serve.term} served after term ${newer.term} was elected`,
      from: serve.invokedAt,
      to: serve.completedAt,
      observations: [serve, newer],
    });
  }

  // Rule 2: per leadership (curator, term), its first return and its last invocation.
  const leaderships = new Map<
    string,
    { curator: string; term: number; first: TermServe; last: TermServe }
  >();
  for (const serve of termServes) {
    const key = `${serve.curator}:${serve.term}`;
    const l = leaderships.get(key);
    if (!l) {
      leaderships.set(key, { curator: serve.curator, term: serve.term, first: serve, last: serve });
      continue;
    }
    if (serve.completedAt < l.first.completedAt) l.first = serve;
    if (serve.invokedAt > l.last.invokedAt) l.last = serve;
  }
  for (const o of observations) {
    for (const l of leaderships.values()) {
      // With a term on both sides, rule 1 already decides (whichever term is older).
      if (l.curator === o.curator || o.term !== undefined) continue;
      if (!(l.first.completedAt < o.invokedAt && l.last.invokedAt > o.completedAt)) continue;
      add(`2:${o.curator}:${o.term ?? "?"}:${l.curator}:${l.term}`, {
        rule: "between-serves-of-another",
        message:
          `${describe(o)}, while ${l.curator}'s term ${l.term} served before it ` +
          `(${describe(l.first)}) and after it (${describe(l.last)})`,
        from: o.invokedAt,
        to: o.completedAt,
        observations: [o, l.first, l.last],
      });
    }
  }

  const anomalies = [...found.values()].sort((a, b) => a.from - b.from);
  return {
    anomalies,
    moments: mergeWindows(windows),
    serves: observations.filter((o) => o.kind === "serve").length,
    claims: observations.filter((o) => o.kind === "claim").length,
    terms: [...leaderships.values()]
      .map((l) => ({
        curator: l.curator,
        term: l.term,
        first: l.first.completedAt,
        last: l.last.invokedAt,
      }))
      .sort((a, b) => a.term - b.term),
  };
}

/** The anomalies' windows, those that overlap or are less than momentGapMs apart merged, in time order. */
function mergeWindows(windows: ReadonlyArray<{ from: number; to: number }>): Array<{
  from: number;
  to: number;
}> {
  const merged: Array<{ from: number; to: number }> = [];
  for (const w of [...windows].sort((a, b) => a.from - b.from)) {
    const last = merged.at(-1);
    if (last !== undefined && w.from < last.to + momentGapMs) last.to = Math.max(last.to, w.to);
    else merged.push({ from: w.from, to: w.to });
  }
  return merged;
}

/**
 * The workload's and the probe's acknowledged calls as `serve` observations
 * without a term: an `ok` answer from the curator it was sent to shows that
 * curator acting as the leader inside the call's interval.
 */
export function servesInHistory(history: readonly Operation[]): LeaderObservation[] {
  const calls: Record<Operation["type"], string> = {
    read: "GetNodes",
    write: "UpdateNodeLabels",
    other: "UpdateNodeRoles",
  };
  const serves: LeaderObservation[] = [];
  for (const op of history) {
    if (op.outcome !== "ok" || op.servedBy === undefined) continue;
    serves.push({
      kind: "serve",
      curator: op.servedBy,
      call: calls[op.type],
      invokedAt: op.invokedAt,
      completedAt: op.completedAt,
    });
  }
  return serves;
}
