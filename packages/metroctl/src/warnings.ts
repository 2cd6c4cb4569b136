/**
 * The warning filter of the `metroctl` executable. metroctl dials curators
 * and nodes by IP address with the node's ID as the TLS server name check,
 * and Node warns (DEP0123) about every TLS connection to an IP address with
 * a server name. This is the filter of @metropolis/curator's
 * `silenceIpServerNameWarning`, here because loading @metropolis/curator
 * (grpc-js, the protobuf code, x509) before the command is known would cost
 * `metroctl --help` the start-up it is meant to save.
 */

/** Prints every process warning as Node does, except DEP0123 (a TLS server name on an IP address). */
export function silenceIpServerNameWarning(): void {
  process.removeAllListeners("warning");
  process.on("warning", (warning: Error & { code?: string }) => {
    if (warning.code !== "DEP0123") process.stderr.write(`${warning.name}: ${warning.message}\n`);
  });
}
