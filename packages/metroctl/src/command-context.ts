/**
 * What every command gets: the run's I/O, the global flags (config dir,
 * endpoints, dial timeout) resolved and checked, and where to remember
 * endpoints once they proved to lead to a cluster.
 */
import { ConfigDir, defaultConfigDir } from "./config-dir";
import { formatEndpoint, parseEndpointList, type Endpoint } from "./endpoints";
import { MissingEndpointsError } from "./errors";
import { defaultDialTimeoutMs } from "./flag-defaults";
import { parseSeconds } from "./flag-values";
import type { MetroctlIo } from "./io";

/** The global flags as commander hands them over. */
export interface GlobalOptions {
  config?: string;
  endpoints?: string;
  dialTimeout?: string;
}

export { defaultDialTimeoutMs } from "./flag-defaults";

export class CommandContext {
  /** The config dir of this run. */
  readonly configDir: ConfigDir;
  /** How long to try to reach the curator leader, per call. */
  readonly dialTimeoutMs: number;
  /** Endpoints given with --endpoints, if any. */
  private readonly flagEndpoints: Endpoint[] | undefined;
  private remembered = false;

  constructor(
    readonly io: MetroctlIo,
    globals: GlobalOptions,
  ) {
    const env = io.env ?? process.env;
    this.configDir = new ConfigDir(globals.config ?? defaultConfigDir(env));
    this.dialTimeoutMs =
      globals.dialTimeout === undefined
        ? defaultDialTimeoutMs
        : parseSeconds(globals.dialTimeout, "--dial-timeout");
    this.flagEndpoints =
      globals.endpoints === undefined ? undefined : parseEndpointList(globals.endpoints);
  }

  /** Aborted when the operator interrupts (Ctrl-C). */
  get signal(): AbortSignal | undefined {
    return this.io.signal;
  }

  /** The curator endpoints: from --endpoints, else remembered in the config dir. */
  async endpoints(): Promise<Endpoint[]> {
    if (this.flagEndpoints) return this.flagEndpoints;
    const stored = await this.configDir.readEndpoints();
    if (stored.length === 0) throw new MissingEndpointsError(this.configDir.dir);
    return stored;
  }

  /**
   * Remembers the --endpoints of this run in the config dir, once they led to
   * a curator leader: endpoints that never worked are not worth keeping.
   */
  async rememberEndpoints(): Promise<void> {
    if (!this.flagEndpoints || this.remembered) return;
    this.remembered = true;
    const stored = await this.configDir.readEndpoints().catch(() => []);
    const same =
      stored.length === this.flagEndpoints.length &&
      stored.every((e, i) => formatEndpoint(e) === formatEndpoint(this.flagEndpoints![i]));
    if (!same) await this.configDir.writeEndpoints(this.flagEndpoints);
  }
}
