/**
 * Management.RotateClusterSecretsKey: the owner rotates the key that seals
 * the cluster's secrets in etcd. The work is consensus' (rotation.ts): a new
 * key for every member, every secret re-sealed under it, the old keys
 * retired. The curator leader vouches for it with its election key: every
 * write of the rotation is guarded by it, so a leader that loses its lease
 * half-way stops there, and the next rotation finishes the job.
 */
import { status } from "@grpc/grpc-js";
import { GuardLostError, KeyringNotLoadedError, RotationError } from "@metropolis/consensus";
import type { api } from "@metropolis/proto";
import { CuratorError, LostLeadershipError } from "./errors";
import type { LeaderContext } from "./leader-context";

/** Rotates the cluster secrets key; answers what the rotation did. */
export async function rotateClusterSecretsKey(
  ctx: LeaderContext,
): Promise<api.RotateClusterSecretsKeyResponse> {
  const { leadership } = ctx;
  const guard = {
    key: `${leadership.kv.prefix.toString("utf8")}${leadership.key}`,
    createRevision: leadership.createRevision,
  };
  try {
    const result = await ctx.consensus.rotateSecretsKey(guard);
    return {
      keyId: result.keyId,
      retiredKeyIds: result.retiredKeyIds,
      resealed: result.resealed,
    };
  } catch (e) {
    if (e instanceof GuardLostError) throw new LostLeadershipError();
    if (e instanceof RotationError) {
      throw new CuratorError(status.ABORTED, e.message, { cause: e });
    }
    if (e instanceof KeyringNotLoadedError) {
      throw new CuratorError(status.UNAVAILABLE, e.message, { cause: e });
    }
    throw e;
  }
}
