/**
 * TLS credentials of the curator's gRPC traffic.
 *
 * The server requests a client certificate but does not let TLS verify it:
 * a registering node can only present a self-signed one. Each call then
 * classifies its caller (identity.ts). Clients verify the server against the
 * cluster CA; they dial curators by IP, while node certificates name node
 * IDs, so the name check is "the certificate of the node expected there"
 * (or, for an address an operator gave, "some node of this cluster"), not a
 * hostname match.
 *
 * The refusals of the name check are worded without "certificate": TLS
 * verification failures (a foreign or forged CA) are told apart from them by
 * that word (see @metropolis/cluster's enrolment dialling), and an
 * unexpected node at an address is a node that moved, not a forged cluster.
 */
import { constants } from "node:crypto";
import { createSecureContext, type SecureContext } from "node:tls";
import { credentials, ServerCredentials, type ChannelCredentials } from "@grpc/grpc-js";
import { isNodeId } from "@metropolis/pki";
import { quoted } from "./bounded-text";

/** PEM TLS material: own certificate and key, and the CA that vouches for peers. */
export interface TlsPem {
  cert: string;
  key: string;
  ca: string;
}

/**
 * Server credentials that ask for, but do not require or verify, a client
 * certificate.
 *
 * - TLS 1.3 only: a connection's certificate is then its own for its whole
 *   life (TLS 1.2 lets a client renegotiate and present another one), so the
 *   caller can be classified once per connection (identity.ts).
 * - No CA in the TLS context: TLS would verify the client's chain only to
 *   report `authorized`, which nothing reads (identity.ts verifies every
 *   certificate itself, once), and would send the CA certificate along with
 *   its own, which every client holds already.
 * - No session tickets (stateful ones, and no session cache to keep them
 *   in): no client resumes a session (grpc-js never does), and making each
 *   ticket copied the session, parsing the client's certificate again.
 *
 * A handshake costs the server 2.8 ms of CPU that way, 3.6–3.9 ms before
 * (Ed25519 certificates; OpenSSL 3.0 decodes a certificate's key slowly, and
 * each copy of a certificate decodes it again), and its client 2.7 ms
 * instead of 3.3: a new leader meets every node of its cluster at once.
 */
class ClientCertificateRequested extends ServerCredentials {
  constructor(tls: TlsPem) {
    super(
      {
        requestCert: true,
        rejectUnauthorized: false,
        minVersion: "TLSv1.3",
        secureOptions: constants.SSL_OP_NO_TICKET,
      },
      { cert: Buffer.from(tls.cert), key: Buffer.from(tls.key) },
    );
  }

  _equals(other: ServerCredentials): boolean {
    return other === this;
  }
}

export function curatorServerCredentials(tls: TlsPem): ServerCredentials {
  return new ClientCertificateRequested(tls);
}

/**
 * The TLS context of a client of the cluster whose CA is `ca`: the CA and
 * the client's key and certificate, parsed once. Made anew for every
 * credentials object it cost about a millisecond, and a node's connection
 * makes one per curator it may dial (each expects another node's
 * certificate); credentials that differ only in the node they expect share
 * one context (`opts.context` of {@link curatorClientCredentials}).
 */
export function curatorClientContext(
  ca: string,
  client?: { cert: string; key: string },
): SecureContext {
  return createSecureContext({
    ca: Buffer.from(ca),
    ...(client && { key: Buffer.from(client.key), cert: Buffer.from(client.cert) }),
  });
}

/**
 * Client credentials towards curators of the cluster whose CA is `ca`, with
 * an optional client certificate (a node's, the owner's, or a self-signed one).
 * Nodes are dialled by IP and their certificates name node IDs, so the server
 * is checked by its CN: any node of the cluster, or exactly `opts.nodeId`
 * (e.g. the node whose Debug service is dialled). `opts.context`: the TLS
 * context of `ca` and `client` made once by {@link curatorClientContext}.
 */
export function curatorClientCredentials(
  ca: string,
  client?: { cert: string; key: string },
  opts: { nodeId?: string; context?: SecureContext } = {},
): ChannelCredentials {
  return credentials.createFromSecureContext(opts.context ?? curatorClientContext(ca, client), {
    checkServerIdentity: (_host, cert) => {
      // TLS has verified the chain and parsed the certificate already; its
      // subject is read from that parse. A second parse here (with
      // @peculiar/x509: 2–5 ms) was paid on every connection, and nodes
      // reconnecting after a failover make many.
      const cn = typeof cert.subject?.CN === "string" ? cert.subject.CN : undefined;
      const named = cn === undefined ? "no common name" : quoted(cn);
      if (opts.nodeId !== undefined) {
        return cn === opts.nodeId
          ? undefined
          : new Error(
              `expected node ${opts.nodeId} here, but the node answering is ${named}: refused`,
            );
      }
      return cn !== undefined && isNodeId(cn)
        ? undefined
        : new Error(`the party answering is ${named}, not a node of this cluster`);
    },
  });
}

/**
 * grpc-js sets the TLS server name to the IP it dials, which Node flags as
 * DEP0123 on every connection. Curators and nodes are dialled by IP by
 * design (their certificates name node IDs, checked above), so binaries
 * silence that one warning; every other warning is still printed.
 */
export function silenceIpServerNameWarning(): void {
  process.removeAllListeners("warning");
  process.on("warning", (warning: Error & { code?: string }) => {
    if (warning.code !== "DEP0123") process.stderr.write(`${warning.name}: ${warning.message}\n`);
  });
}
