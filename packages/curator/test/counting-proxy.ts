/** A TCP proxy for tests that need to know how many connections a client made. */
import { connect, createServer, type Socket } from "node:net";

/** A TCP proxy to `host:port` that counts the connections made through it (it listens on `host` too). */
export async function countingProxy(port: number, host = "127.0.0.1") {
  const sockets = new Set<Socket>();
  const counts = { connections: 0 };
  const server = createServer((inbound) => {
    counts.connections++;
    const outbound = connect(port, host);
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on("error", () => undefined);
      s.on("close", () => sockets.delete(s));
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("proxy has no port");
  return {
    port: address.port,
    counts,
    /** Cuts every connection made so far, as a restart of the server behind it would; keeps listening. */
    drop: () => {
      for (const s of sockets) s.destroy();
    },
    stop: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}
