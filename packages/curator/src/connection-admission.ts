/**
 * Admission of new connections into a curator: at most a few TLS handshakes
 * are started per turn of the event loop, and none while it runs late; the
 * rest wait, accepted but unread, in arrival order.
 *
 * Without it, a whole cluster's nodes dialling a new leader (or a cold
 * start) made the leader start thousands of handshakes at once. libuv hands
 * a process every ready socket in one turn of its loop, so one turn took
 * seconds of handshakes (3–4 ms of CPU each), during which nothing else
 * ran: not the heartbeats and streams of the nodes already attached, which
 * timed out and came back as more handshakes, and not the renewal of the
 * leader's own etcd lease, which expired — in the scale simulator the leader
 * lost its leadership in the middle of 1,500 nodes attaching, and they all
 * started over. Admitted in order, a connection's handshake and first calls
 * finish quickly and the nodes become HEALTHY one after another instead of
 * all late together.
 *
 *   accepted socket ──▶ waiting (paused, FIFO) ──pump: ≤ perTurn, loop on time──▶ admit
 */
import type { Socket } from "node:net";

export interface AdmissionOptions {
  /**
   * Connections admitted per turn of the event loop.
   * @default 8
   */
  perTurn?: number;
  /**
   * How late the event loop may come around to admitting (the time from
   * one admission turn being scheduled to its running) before admission
   * pauses for {@link pauseMs} to let it catch up.
   * @default 50
   */
  maxLagMs?: number;
  /**
   * Connections kept waiting; beyond, the oldest is closed (its client
   * retries).
   * @default 4096
   */
  maxWaiting?: number;
}

/** The pause after a late turn of the event loop before admitting again. */
export const pauseMs = 20;

export class ConnectionAdmission {
  private readonly waiting = new Set<Socket>();
  private readonly perTurn: number;
  private readonly maxLagMs: number;
  private readonly maxWaiting: number;
  private pumping = false;
  private closed = false;

  constructor(
    private readonly admit: (socket: Socket) => void,
    opts: AdmissionOptions = {},
  ) {
    this.perTurn = opts.perTurn ?? 8;
    this.maxLagMs = opts.maxLagMs ?? 50;
    this.maxWaiting = opts.maxWaiting ?? 4096;
  }

  /** Connections waiting to be admitted. */
  get size(): number {
    return this.waiting.size;
  }

  /** A connection just accepted (paused): admitted in its turn. */
  offer(socket: Socket): void {
    if (this.closed) {
      socket.destroy();
      return;
    }
    this.waiting.add(socket);
    // A reset while waiting must not be an unhandled 'error' event.
    socket.on("error", () => undefined);
    socket.once("close", () => this.waiting.delete(socket));
    if (this.waiting.size > this.maxWaiting) {
      const [oldest] = this.waiting;
      this.waiting.delete(oldest);
      oldest.destroy();
    }
    if (!this.pumping) {
      this.pumping = true;
      this.schedulePump(setImmediate);
    }
  }

  /** Closes every waiting connection; later ones are closed as they come. */
  close(): void {
    this.closed = true;
    for (const socket of this.waiting) socket.destroy();
    this.waiting.clear();
  }

  /**
   * Runs the pump on the next turn (`setImmediate`) or after a pause; the
   * time it then took to run is how late the event loop is.
   */
  private schedulePump(later: (run: () => void) => unknown): void {
    const scheduled = performance.now();
    later(() => this.pump(performance.now() - scheduled));
  }

  private pump(lateMs: number): void {
    if (this.closed) return;
    if (lateMs > this.maxLagMs) {
      // The loop is behind: let it catch up before starting more handshakes.
      this.schedulePump((run) => setTimeout(run, pauseMs));
      return;
    }
    let admitted = 0;
    for (const socket of this.waiting) {
      if (admitted++ >= this.perTurn) break;
      this.waiting.delete(socket);
      if (!socket.destroyed) this.admit(socket);
    }
    if (this.waiting.size > 0) this.schedulePump(setImmediate);
    else this.pumping = false;
  }
}
