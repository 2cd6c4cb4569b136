/**
 * Where a node's etcd member serves its clients: a unix socket in the
 * node's ephemeral consensus directory, never a TCP port (only the node
 * itself may talk to its member as a client).
 *
 * Linux keeps a unix socket's path in `sockaddr_un.sun_path`, 108 bytes
 * with the terminating NUL, so at most {@link maxSocketPathBytes}. A longer
 * path is not refused where it is used: etcd binds it relative to its
 * working directory, and the client's connect to the absolute path silently
 * goes nowhere, retried until some timeout says only "aborted" (seen with
 * `metropolis-node --recover-from` under a deep `--root`). So the path is
 * checked where it is made, and a node whose root is too deep is told so.
 */
import { join } from "node:path";
import { ConsensusConfigError } from "./errors";

/** The socket, in the ephemeral consensus directory, a node's member serves its clients on. */
export const clientSocketName = "client.sock:0";

/** The longest unix socket path Linux accepts (sun_path less its NUL). */
export const maxSocketPathBytes = 107;

/**
 * The path of socket `name` in directory `dir`, as an etcd member's client
 * endpoint (`name` ends in `:0`, etcd's way of naming a unix socket).
 *
 * @throws ConsensusConfigError when the path is longer than a unix socket's may be, naming it.
 */
export function memberSocketPath(dir: string, name: string): string {
  const path = join(dir, name);
  const bytes = Buffer.byteLength(path);
  if (bytes > maxSocketPathBytes) {
    throw new ConsensusConfigError(
      `consensus: the etcd member's socket ${JSON.stringify(path)} is ${bytes} bytes long; a unix socket's path may be at most ${maxSocketPathBytes}: give the node a shorter --root (it is under the root's ephemeral/consensus/)`,
    );
  }
  return path;
}
