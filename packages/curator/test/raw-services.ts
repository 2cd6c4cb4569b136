/**
 * Services of raw bytes, one method each, for tests of the curator's gRPC
 * plumbing (listener, call router, interceptors): no protobuf in the way.
 */
import {
  makeGenericClientConstructor,
  ServerCredentials,
  type Server,
  type ServiceDefinition,
  type ServiceError,
} from "@grpc/grpc-js";
import { freePort } from "@metropolis/consensus/testing";

/** The (de)serializer of raw bytes. */
export const identity = (b: Buffer): Buffer => b;

function rawService(service: string, method: string, responseStream: boolean): ServiceDefinition {
  return {
    [method]: {
      path: `/test.${service}/${service}`,
      requestStream: false,
      responseStream,
      requestSerialize: identity,
      requestDeserialize: identity,
      responseSerialize: identity,
      responseDeserialize: identity,
      originalName: method,
    },
  };
}

/** `/test.Who/Who`: a unary method. */
export const whoService = rawService("Who", "who", false);

/** `/test.Tick/Tick`: a server-streaming method. */
export const tickService = rawService("Tick", "tick", true);

/** A client of {@link whoService}. */
export const WhoClient = makeGenericClientConstructor(whoService, "Who");

/** A client of {@link tickService}. */
export const TickClient = makeGenericClientConstructor(tickService, "Tick");

/** Asks `client` (of {@link whoService}) who answers. */
export const askWho = (client: InstanceType<typeof WhoClient>) =>
  new Promise<string>((resolve, reject) =>
    client.makeUnaryRequest(
      "/test.Who/Who",
      identity,
      identity,
      Buffer.alloc(0),
      { deadline: Date.now() + 10_000 },
      (e: ServiceError | null, b?: Buffer) => (e ? reject(e) : resolve(String(b))),
    ),
  );

/** Binds `server` without TLS to a free port on `host`; resolves to the port. */
export async function bindInsecure(server: Server, host: string): Promise<number> {
  const port = await freePort(host);
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`${host}:${port}`, ServerCredentials.createInsecure(), (e) =>
      e ? reject(e) : resolve(),
    ),
  );
  return port;
}
