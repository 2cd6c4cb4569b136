/**
 * A grpc-js client interceptor for streaming calls that their caller
 * cancels as a matter of course: a call it cancelled ends as if the server
 * had ended it (`end`, status OK) instead of with an `error` of status
 * CANCELLED.
 *
 * grpc-js builds that error for every cancelled call, whether anyone
 * listens or not, with two captured stack traces, one of them formatted
 * (`callErrorFromStatus`). A node withdraws every question it asks the
 * curators about the leader once one has answered (curator-client.ts,
 * `askLeader`), so each node's search for a new leader after a failover
 * paid for it: in the scale simulator's failover, the making of such errors
 * was 5 % of the simulated nodes' CPU.
 *
 * Only for a call whose listeners are gone, or that treats `end` after its
 * own cancel as the cancel: a status other than CANCELLED, or a CANCELLED
 * one the call did not ask for (the server's, a deadline's), passes as it is.
 */
import { InterceptingCall, status, type Interceptor } from "@grpc/grpc-js";

export const quietCancel: Interceptor = (options, nextCall) => {
  let cancelledHere = false;
  return new InterceptingCall(nextCall(options), {
    start: (metadata, _listener, next) =>
      next(metadata, {
        onReceiveStatus: (received, nextStatus) =>
          nextStatus(
            cancelledHere && received.code === status.CANCELLED
              ? { ...received, code: status.OK }
              : received,
          ),
      }),
    cancel: (next) => {
      cancelledHere = true;
      next();
    },
  });
};
