/**
 * A grpc-js client interceptor under which a call that ends with an error
 * status gets its error without a stack trace of its own: the error keeps
 * its message, code, details, metadata and the "for call at" stack of the
 * code that made the call, and loses only the frames of grpc-js' event
 * callback that noticed the status, which say nothing.
 *
 * grpc-js makes that error (`callErrorFromStatus`) with two `new Error`s,
 * each capturing a stack, and formats one of them, for every call that ends
 * with a status other than OK. A leader's failure ends every stream of every
 * node of the cluster at once (UNAVAILABLE), and each node's calls to the
 * failed leader fail after it too: in a profile of the scale simulator's
 * node hosts in a failover, making and formatting those errors was about
 * 7 % of their CPU, in the seconds every node needs its CPU to come back.
 *
 * The status is passed on, with the error made from it, inside
 * `withoutStackTrace`: whatever the call's listeners do synchronously with
 * it (a stream's `error` handlers, a unary call's callback) makes errors
 * without stack frames too. The clients of a CuratorConnection use it; their
 * listeners hand the error on (a promise, a stream's own error) rather than
 * make new ones.
 */
import { InterceptingCall, status, type Interceptor } from "@grpc/grpc-js";
import { withoutStackTrace } from "@metropolis/supervisor";

export const stacklessStatus: Interceptor = (options, nextCall) =>
  new InterceptingCall(nextCall(options), {
    start: (metadata, _listener, next) =>
      next(metadata, {
        onReceiveStatus: (received, nextStatus) => {
          if (received.code === status.OK) nextStatus(received);
          else withoutStackTrace(() => nextStatus(received));
        },
      }),
  });
