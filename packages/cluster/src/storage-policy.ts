/** The cluster's storage policy (wire enum) as the local storage's data policy, and back. */
import type { DataPolicy } from "@metropolis/localstorage";
import { common } from "@metropolis/proto";
import { EnrolmentError } from "./errors";

const policies: ReadonlyMap<common.StoragePolicy, DataPolicy> = new Map([
  [common.StoragePolicy.INSECURE, "insecure"],
  [common.StoragePolicy.ENCRYPTED, "encrypted"],
  [common.StoragePolicy.AUTHENTICATED_ENCRYPTED, "authenticated-encrypted"],
]);

/** The data policy for `policy`; an unknown or unset policy is refused, never defaulted. */
export function dataPolicyOf(policy: common.StoragePolicy): DataPolicy {
  const found = policies.get(policy);
  if (!found) {
    throw new EnrolmentError(
      `the cluster asks for storage policy ${common.storagePolicyToJSON(policy)}, which this node does not know`,
    );
  }
  return found;
}
