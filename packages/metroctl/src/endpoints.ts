/**
 * Curator endpoints as the operator writes them: `host`, `host:port`,
 * `[v6]:port` or a bare IPv6 address. A missing port is the curator's
 * default (7835), so `--endpoints 10.0.0.1` just works.
 */
import { isIP } from "node:net";
import { defaultCuratorPort } from "@metropolis/curator";
import { UsageError } from "./errors";

/** One curator to dial. */
export interface Endpoint {
  host: string;
  port: number;
}

const hostPattern = /^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$/;

function parsePort(text: string, input: string): number {
  const port = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(port >= 1 && port <= 65535)) {
    throw new UsageError(`endpoint "${input}": port must be a number from 1 to 65535`);
  }
  return port;
}

function checkHost(host: string, input: string): string {
  if (isIP(host) === 0 && !hostPattern.test(host)) {
    throw new UsageError(`endpoint "${input}": "${host}" is not an IP address or host name`);
  }
  return host;
}

/** Parses one endpoint; throws {@link UsageError} naming the input when it is malformed. */
export function parseEndpoint(input: string): Endpoint {
  const text = input.trim();
  if (text === "") throw new UsageError("empty endpoint");
  const bracketed = /^\[([^\]]+)\](?::(.*))?$/.exec(text);
  if (bracketed) {
    if (isIP(bracketed[1]) !== 6) {
      throw new UsageError(`endpoint "${input}": "${bracketed[1]}" is not an IPv6 address`);
    }
    return {
      host: bracketed[1],
      port: bracketed[2] === undefined ? defaultCuratorPort : parsePort(bracketed[2], input),
    };
  }
  // More than one colon without brackets can only be a bare IPv6 address.
  if (isIP(text) === 6) return { host: text, port: defaultCuratorPort };
  const colon = text.lastIndexOf(":");
  if (colon === -1) return { host: checkHost(text, input), port: defaultCuratorPort };
  return {
    host: checkHost(text.slice(0, colon), input),
    port: parsePort(text.slice(colon + 1), input),
  };
}

/** Parses a comma-separated list of endpoints (at least one). */
export function parseEndpointList(input: string): Endpoint[] {
  const parts = input.split(",").filter((part) => part.trim() !== "");
  if (parts.length === 0) throw new UsageError("--endpoints: no endpoint given");
  return parts.map(parseEndpoint);
}

/** The `host:port` form gRPC dials (IPv6 hosts in brackets). */
export function formatEndpoint({ host, port }: Endpoint): string {
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}
