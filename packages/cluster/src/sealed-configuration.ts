/**
 * The node's sealed configuration on the ESP: its presence decides that the
 * node rejoins its cluster, and it holds what rejoining needs (NUK, join key,
 * cluster CA). Reading it is strict: a file that does not unseal or decode is
 * an error naming the file, never a reason to enrol afresh — that would
 * format a node that holds data.
 */
import {
  sealConfiguration,
  SealedCorruptedError,
  unsealConfiguration,
  type NodeRoot,
} from "@metropolis/localstorage";
import { priv } from "@metropolis/proto";

/** The node's sealed configuration, or undefined when the node has none (it never enrolled). */
export async function readSealedConfiguration(
  storage: NodeRoot,
  machineKeyPath: string,
): Promise<priv.SealedConfiguration | undefined> {
  const file = storage.esp.metropolis.sealedConfiguration;
  if (!(await file.exists())) return undefined;
  const bytes = await unsealConfiguration(file, { machineKeyPath });
  let sealed: priv.SealedConfiguration;
  try {
    sealed = priv.SealedConfiguration.decode(bytes);
  } catch (e) {
    throw new SealedCorruptedError(
      file.fullPath,
      `it unsealed, but is not a SealedConfiguration: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  if (sealed.joinKey.length !== 32) {
    throw new SealedCorruptedError(
      file.fullPath,
      `its join key is ${sealed.joinKey.length} bytes, not 32`,
    );
  }
  return sealed;
}

/** Seals the configuration of a freshly enrolled node; an existing one is never replaced. */
export async function writeSealedConfiguration(
  storage: NodeRoot,
  machineKeyPath: string,
  sealed: priv.SealedConfiguration,
): Promise<void> {
  await sealConfiguration(
    storage.esp.metropolis.sealedConfiguration,
    priv.SealedConfiguration.encode(sealed).finish(),
    { machineKeyPath },
  );
}
