/**
 * The register ticket's storage: `/global/register_ticket` holds a
 * `priv.RegisterTicket`, sealed with the cluster secrets keyring (whoever
 * reads the ticket off a disk could register nodes with it).
 */
import { status } from "@grpc/grpc-js";
import type { Namespace } from "etcd3";
import type { SecretSealer } from "@metropolis/pki";
import { priv } from "@metropolis/proto";
import { CuratorError } from "./errors";
import { registerTicketKey } from "./keys";

/** Length of the register ticket, in bytes. */
export const registerTicketLength = 32;

/** The stored (sealed) value of `ticket`. */
export function sealRegisterTicket(secrets: SecretSealer, ticket: Uint8Array): Buffer {
  const encoded = priv.RegisterTicket.encode({ opaque: Buffer.from(ticket) }).finish();
  return secrets.seal(registerTicketKey, encoded);
}

/** The register ticket, or undefined if it has not been created yet. */
export async function readRegisterTicket(
  kv: Namespace,
  secrets: SecretSealer,
): Promise<Buffer | undefined> {
  const sealed = await kv.get(registerTicketKey).buffer();
  if (sealed === null) return undefined;
  const ticket = priv.RegisterTicket.decode(await secrets.open(registerTicketKey, sealed)).opaque;
  if (ticket.length !== registerTicketLength) {
    throw new CuratorError(status.DATA_LOSS, `stored register ticket has ${ticket.length} bytes`);
  }
  return ticket;
}
