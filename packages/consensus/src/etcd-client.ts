/**
 * The etcd client of this node's own member, over its unix socket.
 *
 * etcd3's default fault handling opens a circuit breaker for 5 s after three
 * failures; while our member restarts (the supervisor restarts a crashed etcd
 * within a second) that would make every user of the client fail for five
 * more seconds. So: no breaker, and a few quick retries of recoverable errors.
 */
import { ExponentialBackoff, handleWhen, noop, retry } from "cockatiel";
import { Etcd3, isRecoverableError } from "etcd3";
import { abortableSleep } from "@metropolis/supervisor";

/**
 * gRPC channel options that give a client connections of its own: grpc-js
 * otherwise shares one connection among all channels to the same target
 * with the same options.
 */
export const ownConnections = { "grpc.use_local_subchannel_pool": 1 } as const;

/** Options of {@link memberClient}. */
export interface MemberClientOptions {
  /**
   * Whether the client gets connections of its own ({@link ownConnections}).
   * Otherwise every client of the member multiplexes its calls with every
   * other's on one HTTP/2 connection: a lease whose keepalives must not queue behind a
   * busy user's watches and writes (the curator's election lease) asks for
   * its own.
   * @default false
   */
  dedicated?: boolean;
}

/** A client of the member listening on `socketPath`. */
export function memberClient(socketPath: string, options: MemberClientOptions = {}): Etcd3 {
  return new Etcd3({
    hosts: `unix://${socketPath}`,
    ...(options.dedicated ? { grpcOptions: ownConnections } : {}),
    faultHandling: {
      host: () => noop,
      global: retry(handleWhen(isRecoverableError), {
        maxAttempts: 5,
        backoff: new ExponentialBackoff({ initialDelay: 20, maxDelay: 500 }),
      }),
    },
  });
}

/** Whether the member answers and its cluster has a leader. */
export async function isServing(client: Etcd3): Promise<boolean> {
  try {
    return (await client.maintenance.status()).leader !== "0";
  } catch {
    return false;
  }
}

/** Waits until the member serves, retrying with backoff until `signal` aborts. */
export async function waitReady(client: Etcd3, signal: AbortSignal): Promise<void> {
  let delay = 10;
  while (!(await isServing(client))) {
    await abortableSleep(delay, signal);
    delay = Math.min(delay * 2, 500);
  }
}
