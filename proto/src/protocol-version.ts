/**
 * The wire protocol version: which conversation between nodes and curators
 * this build speaks. It is bumped when a change of the schema or of the
 * calls' meaning means a curator of one build cannot serve a node of another
 * (a field a curator must see, a call whose meaning changed), not for every
 * release: nodes of several releases speak one protocol.
 *
 * A node sends it when it registers and joins (a curator refuses a version
 * it does not serve, naming both, rather than half-understand the node) and
 * in every status report (the owner sees mixed versions). 0 is what a node
 * older than the field sends: it spoke version 1.
 */

/** The protocol version of this build. */
export const protocolVersion = 1;

/** The protocol versions a curator of this build serves (both ends included). */
export const servedProtocolVersions: { readonly oldest: number; readonly newest: number } = {
  oldest: 1,
  newest: protocolVersion,
};

/** The version a node that sent `sent` speaks: 0 (sent by a node older than the field) is 1. */
export function spokenProtocolVersion(sent: number): number {
  return sent === 0 ? 1 : sent;
}
