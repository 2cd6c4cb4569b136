/**
 * Limits every gRPC server of the node core is created with: a client can
 * make a server hold only so much of its memory, whatever it sends.
 *
 * - Requests are small (the largest, a RegisterNode or UpdateNodeLabels with
 *   128 labels of the longest keys and values, is about 50 KiB), so anything
 *   above {@link maxRequestBytes} is refused by grpc-js before it is decoded
 *   (RESOURCE_EXHAUSTED).
 * - A connection may have at most {@link maxConcurrentStreamsPerConnection}
 *   calls open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): a node keeps
 *   a handful (watches, heartbeat), an operator's client a few more.
 */
import type { ServerOptions } from "@grpc/grpc-js";

/** Largest request message a server accepts, in bytes. */
export const maxRequestBytes = 256 * 1024;

/** Calls one connection may have open at once. */
export const maxConcurrentStreamsPerConnection = 100;

/** The grpc-js server options that enforce the limits above. */
export function serverLimits(): ServerOptions {
  return {
    "grpc.max_receive_message_length": maxRequestBytes,
    "grpc.max_concurrent_streams": maxConcurrentStreamsPerConnection,
  };
}
