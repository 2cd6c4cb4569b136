/**
 * A member's cluster secrets keyring, in memory: what every sealer of this
 * member's clients seals and opens with. It is loaded from the member's own
 * wrapped copy in etcd (keyring-follower.ts), or made by bootstrap or a
 * rotation on this member, and replaced whenever a newer copy appears.
 *
 * Changes of the keyring by this member (rotation, wrapping it for a new
 * member) run one at a time through {@link ClusterSecrets.exclusive}, so that
 * a new member never gets a copy of a keyring a rotation is replacing.
 */
import { MemoryValue } from "@metropolis/event";
import type { SecretSealer } from "@metropolis/pki";
import { KeyringNotLoadedError, UnknownSecretKeyError } from "./errors";
import type { SecretKeyring } from "./secret-keyring";

/** What the keyring in memory is, and the etcd revision it was current at. */
export interface LoadedKeyring {
  readonly keyring: SecretKeyring;
  /** The etcd revision of the copy (or the write) it came from; older copies are ignored. */
  readonly revision: bigint;
}

export class ClusterSecrets {
  /** The keyring in memory; undefined until the member has loaded (or made) it. */
  readonly loaded = new MemoryValue<LoadedKeyring | undefined>(undefined);
  #current: LoadedKeyring | undefined;
  #refresh: (() => Promise<void>) | undefined;
  #queue: Promise<unknown> = Promise.resolve();

  /** The keyring; throws {@link KeyringNotLoadedError} when there is none yet. */
  keyring(what = "use it"): SecretKeyring {
    if (this.#current === undefined) throw new KeyringNotLoadedError(what);
    return this.#current.keyring;
  }

  /**
   * Takes `keyring` as current if it is newer than the one in memory (by
   * etcd revision). Returns whether it was taken.
   */
  apply(keyring: SecretKeyring, revision: bigint): boolean {
    if (this.#current !== undefined && this.#current.revision >= revision) return false;
    this.#current = { keyring, revision };
    this.loaded.set(this.#current);
    return true;
  }

  /** The etcd revision the keyring in memory was current at; -1 when none is loaded. */
  get revision(): bigint {
    return this.#current?.revision ?? -1n;
  }

  /** Set by the follower: re-reads this member's copy from etcd now. */
  setRefresh(refresh: (() => Promise<void>) | undefined): void {
    this.#refresh = refresh;
  }

  /**
   * Re-reads this member's copy from etcd (when a follower runs), so that a
   * key made by a rotation elsewhere is known before the watch delivers it.
   */
  async refresh(): Promise<void> {
    await this.#refresh?.();
  }

  /** Runs `change` once every earlier change of this member's keyring has finished. */
  exclusive<T>(change: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(change, change);
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /**
   * A sealer for keys under `prefix` (a client's namespace prefix): the
   * associated data of each value is its full etcd key. Opening a value sealed
   * under a key id this member does not know yet refreshes the keyring once
   * before giving up.
   */
  sealer(prefix: string): SecretSealer {
    return new NamespaceSealer(this, prefix);
  }
}

/** A {@link SecretSealer} for one namespace of etcd. */
class NamespaceSealer implements SecretSealer {
  constructor(
    private readonly secrets: ClusterSecrets | undefined,
    private readonly prefix: string,
  ) {}

  seal(key: string, plaintext: Uint8Array): Buffer {
    return this.keyring(`seal ${this.prefix}${key}`).seal(`${this.prefix}${key}`, plaintext);
  }

  async open(key: string, sealed: Uint8Array): Promise<Buffer> {
    const at = `${this.prefix}${key}`;
    try {
      return this.keyring(`open ${at}`).open(at, sealed);
    } catch (e) {
      if (!(e instanceof UnknownSecretKeyError) || this.secrets === undefined) throw e;
      // A rotation on another member may have made the key: our copy has it
      // before any value is sealed under it (rotation.ts), the watch may just
      // not have delivered it yet.
      await this.secrets.refresh();
      return this.keyring(`open ${at}`).open(at, sealed);
    }
  }

  private keyring(what: string): SecretKeyring {
    if (this.secrets === undefined)
      throw new KeyringNotLoadedError(`${what} (client made without a keyring)`);
    return this.secrets.keyring(what);
  }
}

/** A sealer of a client made without a keyring: every use is {@link KeyringNotLoadedError}. */
export function unloadedSealer(prefix: string): SecretSealer {
  return new NamespaceSealer(undefined, prefix);
}
