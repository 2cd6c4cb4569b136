/**
 * The operator's config dir (default `~/.config/metroctl`): everything that
 * makes this operator the cluster's owner, and where the cluster is.
 *
 *   owner-key.pem   the owner's Ed25519 private key (PKCS#8 PEM, mode 0600)
 *   owner.pem       the owner certificate (CN=owner), from takeownership
 *   ca.pem          the cluster CA, learned at takeownership
 *   endpoints       curator endpoints, one `host:port` a line
 *
 * Every write is atomic (temp file, fsync, rename: localstorage's atomicWriteFile), the directory is 0700 and the
 * key 0600. A file that exists but cannot be read or parsed is an error
 * naming it, never silently replaced: the key in it may be the only way
 * into a cluster.
 */
import { mkdir, readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { atomicWriteFile, FileExistsError } from "@metropolis/localstorage";
import {
  generateKeyPair,
  parseCertificate,
  privateKeyFromPkcs8,
  privateKeyToPem,
  publicKeyFromPrivateKey,
  readAccessRole,
  tlsMaterial,
  type ParsedCertificate,
} from "@metropolis/pki";
import { formatEndpoint, parseEndpoint, type Endpoint } from "./endpoints";
import { ConfigFileError, describeError } from "./errors";

/** File names inside the config dir. */
export const configFiles = {
  ownerKey: "owner-key.pem",
  ownerCertificate: "owner.pem",
  caCertificate: "ca.pem",
  endpoints: "endpoints",
} as const;

/** The owner's key pair (raw Ed25519 seed and public key). */
export interface OwnerKey {
  privateKey: Buffer;
  publicKey: Buffer;
}

/** What Management calls authenticate with: owner certificate and key, and the cluster CA (PEM). */
export interface OwnerCredentials {
  cert: string;
  key: string;
  ca: string;
}

/** The default config dir: `$XDG_CONFIG_HOME/metroctl`, else `$HOME/.config/metroctl`. */
export function defaultConfigDir(env: Readonly<Record<string, string | undefined>>): string {
  const xdg = env.XDG_CONFIG_HOME;
  if (xdg) return join(xdg, "metroctl");
  return join(env.HOME || homedir(), ".config", "metroctl");
}

/** Reads and writes the files of one config dir. */
export class ConfigDir {
  constructor(readonly dir: string) {}

  /** Absolute path of a config file. */
  path(name: (typeof configFiles)[keyof typeof configFiles]): string {
    return join(this.dir, name);
  }

  /** Reads a file; undefined when it does not exist, ConfigFileError when it cannot be read. */
  private async read(name: (typeof configFiles)[keyof typeof configFiles]) {
    const path = this.path(name);
    try {
      return { path, text: await readFile(path, "utf8") };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return { path, text: undefined };
      throw new ConfigFileError(path, `cannot be read: ${describeError(e)}`, { cause: e });
    }
  }

  private async ensureDir(): Promise<void> {
    try {
      await mkdir(this.dir, { recursive: true, mode: 0o700 });
    } catch (e) {
      throw new ConfigFileError(this.dir, `cannot create the config dir: ${describeError(e)}`, {
        cause: e,
      });
    }
  }

  private async write(
    name: (typeof configFiles)[keyof typeof configFiles],
    text: string,
    mode: number,
  ): Promise<void> {
    await this.ensureDir();
    const path = this.path(name);
    try {
      await atomicWriteFile(path, Buffer.from(text), { mode });
    } catch (e) {
      throw new ConfigFileError(path, `cannot be written: ${describeError(e)}`, { cause: e });
    }
  }

  /** The owner key, or undefined when there is none yet. */
  async readOwnerKey(): Promise<OwnerKey | undefined> {
    const { path, text } = await this.read(configFiles.ownerKey);
    if (text === undefined) return undefined;
    try {
      const privateKey = privateKeyFromPkcs8(text);
      return { privateKey, publicKey: publicKeyFromPrivateKey(privateKey) };
    } catch (e) {
      throw new ConfigFileError(path, `not an Ed25519 private key: ${describeError(e)}`, {
        cause: e,
      });
    }
  }

  /**
   * The owner key, created first if there is none. An existing key is always
   * kept: it may already own a cluster.
   */
  async ensureOwnerKey(): Promise<{ key: OwnerKey; created: boolean }> {
    const existing = await this.readOwnerKey();
    if (existing) return { key: existing, created: false };
    await this.ensureDir();
    const fresh = generateKeyPair();
    const path = this.path(configFiles.ownerKey);
    let created = true;
    try {
      await atomicWriteFile(path, Buffer.from(privateKeyToPem(fresh.privateKey)), {
        mode: 0o600,
        exclusive: true,
      });
    } catch (e) {
      if (e instanceof FileExistsError) created = false;
      else throw new ConfigFileError(path, `cannot be written: ${describeError(e)}`, { cause: e });
    }
    // Lost a race with another metroctl: the key it wrote is the owner key.
    if (!created) return { key: (await this.readOwnerKey())!, created: false };
    return { key: fresh, created: true };
  }

  /** Writes the owner key (mode 0600), replacing any existing one. For importing a key. */
  async writeOwnerKey(privateKey: Uint8Array): Promise<void> {
    await this.write(configFiles.ownerKey, privateKeyToPem(privateKey), 0o600);
  }

  private async readCertificate(
    name: typeof configFiles.ownerCertificate | typeof configFiles.caCertificate,
  ): Promise<ParsedCertificate | undefined> {
    const { path, text } = await this.read(name);
    if (text === undefined) return undefined;
    try {
      return parseCertificate(text);
    } catch (e) {
      throw new ConfigFileError(path, `not a certificate: ${describeError(e)}`, { cause: e });
    }
  }

  /**
   * The access role the dir's certificate bears (a dir `metroctl access issue`
   * wrote: reader, operator, backup), or undefined for the owner's (or none).
   */
  async readAccessRole(): Promise<string | undefined> {
    const certificate = await this.readCertificate(configFiles.ownerCertificate);
    if (!certificate) return undefined;
    try {
      return readAccessRole(certificate);
    } catch (e) {
      throw new ConfigFileError(this.path(configFiles.ownerCertificate), describeError(e), {
        cause: e,
      });
    }
  }

  /** The cluster CA certificate, or undefined before takeownership. */
  readCaCertificate(): Promise<ParsedCertificate | undefined> {
    return this.readCertificate(configFiles.caCertificate);
  }

  /** Stores the owner certificate and the cluster CA (PEM). */
  async writeOwnerCertificate(certificate: Uint8Array, ca: Uint8Array): Promise<void> {
    // The CA first: an owner certificate without its CA would be useless, a CA alone is harmless.
    await this.write(configFiles.caCertificate, parseCertificate(ca).toPem(), 0o644);
    await this.write(configFiles.ownerCertificate, parseCertificate(certificate).toPem(), 0o644);
  }

  /**
   * The owner's TLS credentials, or undefined when takeownership has not
   * stored a certificate yet (or no key exists). Throws ConfigFileError when a
   * file is corrupt or the certificate is not the key's.
   */
  async readOwnerCredentials(): Promise<OwnerCredentials | undefined> {
    const key = await this.readOwnerKey();
    const certificate = await this.readCertificate(configFiles.ownerCertificate);
    if (!key || !certificate) return undefined;
    const ca = await this.readCertificate(configFiles.caCertificate);
    if (!ca) {
      throw new ConfigFileError(
        this.path(configFiles.caCertificate),
        "missing, but owner.pem exists: run `metroctl takeownership` again",
      );
    }
    try {
      return tlsMaterial({ certificate, privateKey: key.privateKey, ca });
    } catch (e) {
      throw new ConfigFileError(
        this.path(configFiles.ownerCertificate),
        `does not belong to ${configFiles.ownerKey}: ${describeError(e)}`,
        { cause: e },
      );
    }
  }

  /** The remembered curator endpoints (empty when none). */
  async readEndpoints(): Promise<Endpoint[]> {
    const { path, text } = await this.read(configFiles.endpoints);
    if (text === undefined) return [];
    const lines = text.split("\n").map((line) => line.trim());
    return lines
      .map((line, index) => ({ line, index }))
      .filter(({ line }) => line !== "" && !line.startsWith("#"))
      .map(({ line, index }) => {
        try {
          return parseEndpoint(line);
        } catch (e) {
          throw new ConfigFileError(path, `line ${index + 1}: ${describeError(e)}`, { cause: e });
        }
      });
  }

  /** Remembers `endpoints` for later commands. */
  async writeEndpoints(endpoints: readonly Endpoint[]): Promise<void> {
    await this.write(
      configFiles.endpoints,
      endpoints.map((e) => formatEndpoint(e) + "\n").join(""),
      0o644,
    );
  }
}
