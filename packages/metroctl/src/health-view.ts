/**
 * The cluster's health as metroctl shows it and as its callers judge it
 * (`cluster health`, the support bundle, and a rolling reboot between its
 * steps): the curator leader's checks (Management.GetClusterHealth), each a
 * row of data — name, verdict, detail, nodes — or, when no curator leader
 * answers, one failing `curator-leader` check saying why.
 *
 *   VERDICT  CHECK               DETAIL
 *   ok       curator-leader      node metropolis-… leads (term 12)
 *   FAIL     nodes-up            1 of 3 UP nodes not heartbeating (timeout 10 s): metropolis-… (last heartbeat 14 s ago)
 *   …
 *
 *   unhealthy: 1 check failed (nodes-up)
 */
import { api } from "@metropolis/proto";
import type { ClusterSession } from "./cluster-session";
import { ConfigFileError, MissingEndpointsError, UsageError } from "./errors";
import { describeFailure } from "./failure-message";
import { renderTable } from "./output";

/** A check's verdict. */
export type HealthVerdictName = "ok" | "warn" | "fail";

/** One check as metroctl shows it (and prints with `-o json`). */
export interface HealthCheckView {
  /** Stable, kebab-case: select checks by it. */
  name: string;
  title: string;
  verdict: HealthVerdictName;
  detail: string;
  nodeIds: string[];
}

/** The cluster's health: `cluster health -o json`. */
export interface ClusterHealthView {
  /** The worst verdict of the checks. */
  verdict: HealthVerdictName;
  /** The curator leader that computed them; null when none answered. */
  leaderNodeId: string | null;
  /** When the leader computed them (its clock), ISO 8601; null when none answered. */
  checkedAt: string | null;
  checks: HealthCheckView[];
}

/** A wire verdict as a name; an unknown one (a newer leader's) counts as a failure. */
function verdictName(v: api.HealthVerdict): HealthVerdictName {
  switch (v) {
    case api.HealthVerdict.OK:
      return "ok";
    case api.HealthVerdict.WARN:
      return "warn";
    default:
      return "fail";
  }
}

/** The worst of `verdicts`. */
function worst(verdicts: readonly HealthVerdictName[]): HealthVerdictName {
  if (verdicts.includes("fail")) return "fail";
  if (verdicts.includes("warn")) return "warn";
  return "ok";
}

/** GetClusterHealth's answer as a view. */
export function healthView(res: api.GetClusterHealthResponse): ClusterHealthView {
  const checks = res.checks.map((c): HealthCheckView => ({
    name: c.name,
    title: c.title,
    verdict: verdictName(c.verdict),
    detail: c.detail,
    nodeIds: [...c.nodeIds],
  }));
  return {
    // Judged here too: a leader's overall verdict never hides a failing check.
    verdict: worst([verdictName(res.verdict), ...checks.map((c) => c.verdict)]),
    leaderNodeId: res.leaderNodeId || null,
    checkedAt: res.checkedAt ? res.checkedAt.toISOString() : null,
    checks,
  };
}

/** The health when no curator leader answered: its one check fails with `why`. */
export function leaderlessHealth(why: string): ClusterHealthView {
  return {
    verdict: "fail",
    leaderNodeId: null,
    checkedAt: null,
    checks: [
      {
        name: "curator-leader",
        title: "a curator leader exists",
        verdict: "fail",
        detail: `no curator leader answered: ${why}; the other checks need one`,
        nodeIds: [],
      },
    ],
  };
}

/** gRPC's UNAVAILABLE and DEADLINE_EXCEEDED: no leader answered in time. */
const unreachableCodes: readonly number[] = [14, 4];

/**
 * Whether the failure `e` of GetClusterHealth says that no curator leader
 * answers (so the cluster is judged), rather than that metroctl cannot ask
 * (its config, a refusal of the owner): those are thrown as they are.
 */
function noLeader(e: unknown): boolean {
  if (e instanceof ConfigFileError || e instanceof MissingEndpointsError) return false;
  if (e instanceof UsageError) return false;
  if (typeof e === "object" && e !== null && "code" in e && typeof e.code === "number") {
    return unreachableCodes.includes(e.code);
  }
  return true;
}

/**
 * The cluster's health through `session`: the leader's checks, or, when no
 * curator leader answers, the failing `curator-leader` check naming why.
 * An interruption (Ctrl-C), a config problem or a refusal is thrown, not
 * judged.
 */
export async function readClusterHealth(
  session: ClusterSession,
  signal: AbortSignal | undefined,
): Promise<ClusterHealthView> {
  try {
    return healthView(await session.getClusterHealth());
  } catch (e) {
    if (signal?.aborted || !noLeader(e)) throw e;
    return leaderlessHealth(describeFailure(e, signal)[0]);
  }
}

/** The checks with a verdict of `verdict`. */
export function checksWith(view: ClusterHealthView, verdict: HealthVerdictName): HealthCheckView[] {
  return view.checks.filter((c) => c.verdict === verdict);
}

const shownVerdict: Record<HealthVerdictName, string> = { ok: "ok", warn: "warn", fail: "FAIL" };

/** The table, a blank line, then the summary line. */
export function renderHealth(view: ClusterHealthView): string[] {
  const table = renderTable<HealthCheckView>(
    [
      { heading: "VERDICT", cell: (c) => shownVerdict[c.verdict] },
      { heading: "CHECK", cell: (c) => c.name },
      { heading: "DETAIL", cell: (c) => c.detail },
    ],
    view.checks,
  );
  return [table, "", healthSummary(view)];
}

/** One line: `healthy`, `healthy, with 1 warning (versions)`, `unhealthy: 2 checks failed (a, b)`. */
export function healthSummary(view: ClusterHealthView): string {
  const failed = checksWith(view, "fail").map((c) => c.name);
  const warned = checksWith(view, "warn").map((c) => c.name);
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
  const warnings =
    warned.length > 0 ? `${plural(warned.length, "warning")} (${warned.join(", ")})` : "";
  if (failed.length > 0) {
    return `unhealthy: ${plural(failed.length, "check")} failed (${failed.join(", ")})${warnings ? `; ${warnings}` : ""}`;
  }
  return warnings ? `healthy, with ${warnings}` : "healthy";
}
