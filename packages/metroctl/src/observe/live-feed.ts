/**
 * One upstream stream, many pages: a live feed runs its upstream (a gRPC
 * stream, or the cluster's node list) once for all its subscribers, keeps
 * what a newcomer needs to see first, and sends changes to everyone at most
 * once per coalescing interval, so that a burst of upstream messages (a
 * restart storm, a thousand heartbeats) becomes one event per interval.
 * When the upstream fails, subscribers get a `failure` event saying why and
 * the feed tries again after a pause, for as long as anyone listens.
 */
import { abortableSleep } from "@metropolis/supervisor";
import { describeFailure } from "../failure-message";
import type { FeedFailure } from "./observer-protocol";

/** One named event with its JSON payload. */
export type FeedEvent = readonly [name: string, data: unknown];

/** Where a feed sends events: a page's server-sent event stream. */
export interface FeedSubscriber {
  send(event: string, data: unknown): void;
}

/** Timing of a feed. */
export interface LiveFeedOptions {
  /** At most one batch of changes per this many ms (default 250). */
  coalesceMs?: number;
  /** Pause before the upstream is tried again after it failed or ended (default 2000). */
  retryMs?: number;
  /**
   * The upstream ends by itself once it sent everything (a log backlog
   * without follow): its end is no failure, and it is not run again.
   */
  finite?: boolean;
}

/** The abstract feed; subclasses say how to run the upstream and what to send. */
export abstract class LiveFeed {
  private readonly subscribers = new Set<FeedSubscriber>();
  private readonly coalesceMs: number;
  private readonly retryMs: number;
  private readonly finite: boolean;
  private controller: AbortController | undefined;
  private flushTimer: NodeJS.Timeout | undefined;
  private lastFlush = 0;

  constructor(opts: LiveFeedOptions = {}) {
    this.coalesceMs = opts.coalesceMs ?? 250;
    this.retryMs = opts.retryMs ?? 2000;
    this.finite = opts.finite === true;
  }

  /** How many pages listen. */
  get subscriberCount(): number {
    return this.subscribers.size;
  }

  /**
   * Adds `subscriber`: it gets what the feed knows now, then every batch of
   * changes. The first subscriber starts the upstream. Returns the function
   * that removes it again (the last one out stops the upstream).
   */
  subscribe(subscriber: FeedSubscriber): () => void {
    this.subscribers.add(subscriber);
    for (const [event, data] of this.snapshotEvents()) subscriber.send(event, data);
    if (!this.controller) this.start();
    return () => {
      this.subscribers.delete(subscriber);
      if (this.subscribers.size === 0) this.stop();
    };
  }

  /** Stops the upstream and any pending batch. */
  stop(): void {
    this.controller?.abort();
    this.controller = undefined;
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
  }

  /** Runs the upstream until it ends, fails, or `signal` aborts; calls {@link changed} on news. */
  protected abstract run(signal: AbortSignal): Promise<void>;

  /** What a new subscriber is sent first. */
  protected abstract snapshotEvents(): FeedEvent[];

  /** The changes since the last batch, as events; clears them. */
  protected abstract takePending(): FeedEvent[];

  /** Says that there is news: a batch goes out within the coalescing interval. */
  protected changed(): void {
    if (this.flushTimer !== undefined) return;
    const wait = Math.max(0, this.lastFlush + this.coalesceMs - Date.now());
    this.flushTimer = setTimeout(() => this.flush(), wait);
  }

  /** Sends `event` to every subscriber now. */
  protected broadcast(event: string, data: unknown): void {
    for (const subscriber of this.subscribers) subscriber.send(event, data);
  }

  private flush(): void {
    this.flushTimer = undefined;
    this.lastFlush = Date.now();
    for (const [event, data] of this.takePending()) this.broadcast(event, data);
  }

  private start(): void {
    const controller = new AbortController();
    this.controller = controller;
    void this.loop(controller.signal);
  }

  private async loop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let message = "the stream ended";
      try {
        await this.run(signal);
        if (this.finite) return;
      } catch (e) {
        message = describeFailure(e, undefined)[0];
      }
      if (signal.aborted) return;
      // What was already batched goes out before the news that the stream broke.
      if (this.flushTimer !== undefined) {
        clearTimeout(this.flushTimer);
        this.flush();
      }
      const failure: FeedFailure = { message: oneLine(message), retryInMs: this.retryMs };
      this.broadcast("failure", failure);
      await abortableSleep(this.retryMs, signal).catch(() => undefined);
    }
  }
}

const oneLine = (text: string) => text.replace(/\s*\n\s*/g, " ").trim();
