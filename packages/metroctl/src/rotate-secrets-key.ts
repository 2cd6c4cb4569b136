/**
 * `rotate-secrets-key`: the owner rotates the cluster secrets key, the key
 * that seals every secret the cluster keeps in etcd (the CA private keys, the
 * nodes' cluster unlock keys, the register ticket). The curator leader makes
 * a new key, gives it to every consensus member, re-seals every secret under
 * it and retires the old keys; this prints what it did. Safe to run again:
 * an interrupted rotation is finished by the next one.
 */
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { writeLine } from "./io";
import { writeJson, type OutputFormat } from "./output";

/** `rotate-secrets-key` as `-o json` prints it. */
export interface RotationView {
  /** The id of the key that now seals every secret. */
  keyId: number;
  /** The ids of the keys retired. */
  retiredKeyIds: number[];
  /** How many secrets were re-sealed. */
  resealed: number;
}

/** `rotate-secrets-key [-o json]` */
export async function rotateSecretsKey(
  ctx: CommandContext,
  opts: { output: OutputFormat },
): Promise<void> {
  const result = await withOwnerSession(ctx, (session) => session.rotateClusterSecretsKey());
  const view: RotationView = {
    keyId: result.keyId,
    retiredKeyIds: [...result.retiredKeyIds],
    resealed: result.resealed,
  };
  if (opts.output === "json") {
    writeJson(ctx.io.stdout, view);
    return;
  }
  const retired = view.retiredKeyIds.length > 0 ? view.retiredKeyIds.join(", ") : "none";
  writeLine(
    ctx.io.stdout,
    `cluster secrets key rotated: key ${view.keyId} seals every secret (${view.resealed} re-sealed); retired: ${retired}`,
  );
}
