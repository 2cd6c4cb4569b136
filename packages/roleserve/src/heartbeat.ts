/**
 * The heartbeat worker: keeps this node HEALTHY in the curator's eyes. The
 * curator marks a node HEARTBEAT_TIMEOUT when it has not heard from it for
 * 10 s; the owner sees that in GetNodes and so do operators deciding whether
 * a node is alive. The worker holds one Curator.Heartbeat stream open on the
 * leader and sends a heartbeat on it every few seconds.
 *
 * It does not repair a broken stream itself: a stream that fails or ends
 * fails the worker, and the supervisor restarts it, by which time
 * CuratorConnection finds the leader again (a new one after a failover).
 *
 * It is also how the node notices a leader that hangs: a hung process (or
 * a machine cut off without its connections being reset) leaves the
 * connection open, and only a deadline on an answer notices. A heartbeat
 * not answered in time gives the leader up
 * (CuratorConnection.leaderUnresponsive), which ends the node's other
 * streams on it too, and the node looks for the new leader at once: after
 * the heartbeat's reply timeout (10 s), where the HTTP/2 keepalive alone
 * took up to 30 s. So a node pings its leader only every 30 s
 * (node-credentials.ts' `nodeCuratorKeepalive`).
 *
 * Its beats are spread in time on purpose. A node's beats keep the phase of
 * the moment its stream opened, and a cluster's nodes open their streams
 * together (after a failover, at a cold start), so that they would beat
 * together ever after: the leader met them as a burst every interval rather
 * than as a steady rate (5,000 simulated nodes: the busiest 100 ms of the
 * 5 s interval held 4× the mean, the busiest tenth of it 37 % of all beats,
 * and the heartbeat's p99 was 277 ms). So the second beat follows the first
 * after a random part of the interval, which puts the node at a random
 * phase, and every pause after that strays from the interval by up to
 * {@link defaultHeartbeatJitter}, so that beats a stalled event loop let
 * fall due together (a garbage collector's pause) part again.
 */
import {
  answerDeadline,
  defaultBackoff,
  type BackoffOptions,
  type Runnable,
} from "@metropolis/supervisor";
import { waitFor } from "@metropolis/event";
import type { CuratorConnection, LeaderClients } from "@metropolis/curator";
import type { curator } from "@metropolis/proto";
import { defaultFirstMessageTimeoutMs, openStream, type CuratorStream } from "./curator-calls";
import { HeartbeatTimeoutError } from "./errors";
import type { RoleserveValues } from "./values";

/**
 * Time between heartbeats: half the curator's heartbeat timeout (10 s), so
 * that one late or lost heartbeat does not yet make the node look dead.
 */
export const defaultHeartbeatIntervalMs = 5000;

/**
 * How far a pause between two heartbeats strays from the interval, as a
 * share of it: each is drawn from interval × [1 − jitter, 1 + jitter].
 */
export const defaultHeartbeatJitter = 0.1;

type HeartbeatCall = ReturnType<curator.CuratorClient["heartbeat"]>;

export interface HeartbeatOptions {
  /**
   * Mean time between heartbeats; default {@link defaultHeartbeatIntervalMs}.
   * With its jitter it must stay below the curator's timeout.
   */
  intervalMs?: number;
  /**
   * How far each pause between heartbeats strays from `intervalMs`, as a
   * share of it (see the worker): from 0 (every pause the interval, after
   * the random second one) to below 1.
   * @default {@link defaultHeartbeatJitter} (0.1)
   */
  jitter?: number;
  /**
   * How long to wait for the answer to a heartbeat before giving the leader
   * up (CuratorConnection.leaderUnresponsive); default twice the interval
   * (the curator's timeout). A leader that hangs keeps its connection open,
   * so only a deadline notices it.
   */
  replyTimeoutMs?: number;
  /**
   * How long to wait for the answer to a stream's first heartbeat: longer
   * than {@link replyTimeoutMs}, since it is the answer a new leader gives
   * every node of the cluster at once, in turn (see the worker).
   * @default {@link defaultFirstMessageTimeoutMs} (30 s)
   */
  firstReplyTimeoutMs?: number;
  /**
   * Called with each heartbeat's answer latency in milliseconds (from the
   * write to the answer): for a node's metrics, and for the scale simulator,
   * which runs this worker for thousands of simulated nodes.
   */
  onAnswered?: (latencyMs: number) => void;
  /**
   * The local etcd member's latest view of the consensus, if this node runs
   * one (consensus-view.ts): each heartbeat carries it to the leader's
   * health check.
   */
  consensusView?: () => curator.ConsensusView | undefined;
  /**
   * The node's wipe (DecommissionNode with `wipe`): once `wipeOrdered` is
   * true, every heartbeat carries `wipe_acknowledged`, and the first answer
   * to one sets `wipeAcknowledged` (the curator has it, and may revoke the
   * node's certificate). The roleserver passes its values.
   */
  wipe?: Pick<RoleserveValues, "wipeOrdered" | "wipeAcknowledged">;
}

/**
 * How the heartbeat worker is restarted: the supervisor's backoff, but
 * growing only up to the heartbeat interval. The default cap (60 s) is for
 * services that keep failing; a node whose heartbeat worker waited that long
 * between attempts (every attempt failing while a new leader is swamped after
 * a failover) would be reported HEARTBEAT_TIMEOUT long after the control
 * plane could hear it again — the scale simulator saw nodes stay unhealthy
 * for minutes that way. Pass it as the child's `backoff` option.
 */
export function heartbeatRestartBackoff(
  intervalMs = defaultHeartbeatIntervalMs,
): Required<BackoffOptions> {
  return {
    ...defaultBackoff,
    initialMs: Math.min(defaultBackoff.initialMs, intervalMs),
    maxMs: intervalMs,
  };
}

/**
 * A heartbeat: this node's wall clock now and the previous heartbeat's
 * round trip, from which the curator leader estimates how far this node's
 * clock is from its own (its health check of clocks; nothing times on it).
 */
export function clockSample(
  previousRoundTripMs: number,
): Pick<curator.HeartbeatRequest, "sentAt" | "previousRoundTripMs"> {
  return { sentAt: new Date(), previousRoundTripMs };
}

/** The answer to the heartbeat just sent, or HeartbeatTimeoutError after `timeoutMs`. */
async function answered(
  stream: CuratorStream<curator.HeartbeatResponse, HeartbeatCall>,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<void> {
  const deadline = answerDeadline(timeoutMs, () => new HeartbeatTimeoutError(timeoutMs), signal);
  try {
    await stream.next(deadline.signal);
  } finally {
    deadline.clear();
  }
}

/**
 * The heartbeat worker: waits for `values.curatorConnection`, then sends
 * heartbeats to the curator leader about every `intervalMs` (see the top of
 * this file for how they are spread). Healthy once the first heartbeat was
 * answered; fails when the stream fails or ends.
 */
export function heartbeatWorker(
  values: Pick<RoleserveValues, "curatorConnection">,
  opts: HeartbeatOptions = {},
): Runnable {
  const intervalMs = opts.intervalMs ?? defaultHeartbeatIntervalMs;
  const replyTimeoutMs = opts.replyTimeoutMs ?? 2 * intervalMs;
  const firstReplyTimeoutMs = opts.firstReplyTimeoutMs ?? defaultFirstMessageTimeoutMs;
  const jitter = opts.jitter ?? defaultHeartbeatJitter;
  if (!(intervalMs > 0))
    throw new RangeError(`heartbeat interval must be positive, not ${intervalMs}`);
  if (!(jitter >= 0 && jitter < 1))
    throw new RangeError(`heartbeat jitter must be at least 0 and below 1, not ${jitter}`);
  /** The pause before the next beat: the interval, give or take the jitter. */
  const pause = () => intervalMs * (1 + jitter * (2 * Math.random() - 1));
  /** Whether the node's record asked for its wipe, as last seen (kept across restarts). */
  let wipeOrdered = false;
  /** A heartbeat as sent now: a clock sample, the consensus view, the wipe's acknowledgement. */
  const beat = (roundTripMs: number): curator.HeartbeatRequest => ({
    ...clockSample(roundTripMs),
    consensusView: opts.consensusView?.(),
    // Only once ordered: the field is unset on every other heartbeat.
    ...(wipeOrdered ? { wipeAcknowledged: true } : {}),
  });
  /** After the answer to a heartbeat that carried `acknowledged`. */
  const answeredBeat = (acknowledged: boolean) => {
    if (acknowledged && opts.wipe) opts.wipe.wipeAcknowledged.set(true);
  };
  return async (ctx) => {
    let stream: CuratorStream<curator.HeartbeatResponse, HeartbeatCall> | undefined;
    /** The connection and the leader its stream is on, once opened. */
    let on: { connection: CuratorConnection; leader: LeaderClients } | undefined;
    const stopFollowing = new AbortController();
    const following = followWipe(opts.wipe, stopFollowing.signal, (ordered) => {
      wipeOrdered = ordered;
    });
    try {
      const { connection } = await waitFor(values.curatorConnection, () => true, ctx.signal);
      // Paced on the monotonic clock: on the wall clock a step back (an NTP
      // correction, a clock set by hand) stretched the pause before the next
      // beat by the step — 60 s back, and the node was HEARTBEAT_TIMEOUT for
      // a minute — and a step ahead sent the next beat at once.
      let sentAt = performance.now();
      let firstAcknowledged = false;
      const opened = await openStream<curator.HeartbeatResponse, HeartbeatCall>(
        connection,
        "Curator.Heartbeat",
        (leader) => {
          const call = leader.curator.heartbeat();
          sentAt = performance.now();
          const first = beat(0);
          firstAcknowledged = first.wipeAcknowledged === true;
          call.write(first);
          return call;
        },
        ctx.signal,
        // The first answer is waited for longer than the others (30 s by
        // default): it is the one a new leader gives every node of the
        // cluster at once, and answers in turn. Giving up on it at the reply
        // timeout (10 s) and dialling again threw that turn away and queued
        // the node at the back once more — a retry storm that kept 5,000
        // simulated nodes from being HEALTHY for most of a minute after a
        // failover. A leader that hangs is still noticed: by this deadline,
        // and by the connection's keepalive.
        firstReplyTimeoutMs,
      );
      stream = opened.stream;
      on = { connection, leader: opened.leader };
      answeredBeat(firstAcknowledged);
      ctx.healthy();
      ctx.logger.info("heartbeats answered by the curator");
      // A random phase for this node's beats (see the top of this file).
      let nextAt = sentAt + Math.random() * intervalMs;
      /** The previous heartbeat's round trip (monotonic), sent with the next for the clock check. */
      let roundTripMs = 0;
      for (;;) {
        // Paced from the previous send, so that slow answers do not stretch
        // the interval towards the curator's timeout. The stream's sleep ends
        // early when the stream breaks: the worker fails now, not at the next beat.
        await stream.sleep(Math.max(0, nextAt - performance.now()), ctx.signal);
        nextAt = performance.now() + pause();
        const sent = beat(roundTripMs);
        stream.call.write(sent);
        const writtenAt = performance.now();
        await answered(stream, replyTimeoutMs, ctx.signal);
        answeredBeat(sent.wipeAcknowledged === true);
        const latencyMs = performance.now() - writtenAt;
        roundTripMs = Math.max(1, Math.round(latencyMs));
        opts.onAnswered?.(latencyMs);
      }
    } catch (e) {
      // Stopping is not a failure; whatever it interrupted is moot.
      if (ctx.signal.aborted) return;
      if (e instanceof HeartbeatTimeoutError) on?.connection.leaderUnresponsive(on.leader, e);
      throw e;
    } finally {
      stream?.cancel();
      stopFollowing.abort();
      await following;
    }
  };
}

/** Calls `update` with each value of `wipe.wipeOrdered` until `signal` aborts (nothing without `wipe`). */
async function followWipe(
  wipe: HeartbeatOptions["wipe"],
  signal: AbortSignal,
  update: (ordered: boolean) => void,
): Promise<void> {
  if (wipe === undefined) return;
  const watcher = wipe.wipeOrdered.watch();
  try {
    while (!signal.aborted) update(await watcher.get({ signal }));
  } catch (e) {
    if (!signal.aborted) throw e;
  } finally {
    watcher.close();
  }
}
