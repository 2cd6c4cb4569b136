/**
 * How the page talks to its server: the launch token (taken from the URL
 * fragment once, kept in this tab's sessionStorage, and removed from the
 * address bar), event streams (EventSource, token as `?token=`), and
 * actions (POST with the token in a header).
 */
import { useEffect, useState } from "preact/hooks";
import { tokenHeader, type ActionResult } from "../../src/observe/observer-protocol";

const storageKey = "metropolis-observer-token";

/** Reads the token from `#token=…` on first load, then from sessionStorage. */
function launchToken(): string {
  const match = /(?:^#|&)token=([0-9a-f]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem(storageKey, match[1]);
    history.replaceState(null, "", location.pathname + "#/");
  }
  return sessionStorage.getItem(storageKey) ?? "";
}

/** The token of this launch. */
export const token = launchToken();

/** The state of an event stream: connecting, live, or broken (with why). */
export type StreamStatus =
  { kind: "connecting" } | { kind: "live" } | { kind: "failed"; message: string };

/**
 * Subscribes to the server's event stream at `path` while the component is
 * mounted (again when `path` changes): `handlers` get each named event's
 * parsed payload. Returns the stream's status.
 */
export function useEventStream(
  path: string | null,
  handlers: Record<string, (data: unknown) => void>,
): StreamStatus {
  const [status, setStatus] = useState<StreamStatus>({ kind: "connecting" });
  useEffect(() => {
    if (path === null) return;
    setStatus({ kind: "connecting" });
    const separator = path.includes("?") ? "&" : "?";
    const source = new EventSource(`${path}${separator}token=${encodeURIComponent(token)}`);
    source.onopen = () => setStatus({ kind: "live" });
    source.onerror = () =>
      setStatus({ kind: "failed", message: "connection to the observer lost; reconnecting" });
    for (const [event, handle] of Object.entries(handlers)) {
      source.addEventListener(event, (e: MessageEvent<string>) => {
        if (event !== "failure") setStatus({ kind: "live" });
        handle(JSON.parse(e.data));
      });
    }
    source.addEventListener("failure", (e: MessageEvent<string>) => {
      const failure = JSON.parse(e.data) as { message: string; retryInMs: number };
      setStatus({
        kind: "failed",
        message: `${failure.message} (trying again in ${Math.round(failure.retryInMs / 1000)} s)`,
      });
    });
    return () => source.close();
    // The handlers are the component's; the stream is reopened only for another path.
  }, [path]);
  return status;
}

/** Posts an action; resolves to the server's answer (an API refusal is `ok: false`). */
export async function postAction(path: string, body: unknown): Promise<ActionResult> {
  try {
    const res = await fetch(path, {
      method: "POST",
      headers: { "content-type": "application/json", [tokenHeader]: token },
      body: JSON.stringify(body),
    });
    return (await res.json()) as ActionResult;
  } catch (e) {
    return { ok: false, error: `the observer did not answer: ${String(e)}` };
  }
}

/** Re-renders the calling component every `ms` (ages, countdowns). */
export function useTick(ms: number): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(timer);
  }, [ms]);
  return now;
}
