/**
 * The owner's changes to a node, each behind a confirmation step: approve a
 * NEW node, change its roles, edit its labels. The dialog says exactly what
 * will be sent; the answer (or the Management API's refusal, word for word)
 * stays in the dialog.
 */
import { useState } from "preact/hooks";
import type { ObservedNode, RolesChange } from "../../src/observe/observer-protocol";
import { postAction } from "./observer-api";

/** The action a dialog is open for. */
export type NodeAction = "approve" | "roles" | "labels";

interface Pending {
  title: string;
  path: string;
  body: unknown;
}

const roleNames = ["consensus", "controller", "worker"] as const;

/** A form for one action on `node`, then a confirmation of what it sends. */
export function NodeActionDialog(props: {
  node: ObservedNode;
  action: NodeAction;
  onClose: () => void;
}) {
  const { node, action } = props;
  const base = `/api/nodes/${node.id}`;
  const [roles, setRoles] = useState<RolesChange>({});
  const [labels, setLabels] = useState("");
  const [pending, setPending] = useState<Pending | null>(
    action === "approve"
      ? {
          title: `Approve node ${node.id}? It becomes STANDBY, then commits and comes UP.`,
          path: `${base}/approve`,
          body: {},
        }
      : null,
  );
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<{ ok: boolean; text: string } | null>(null);

  const confirm = async () => {
    if (!pending) return;
    setBusy(true);
    const answer = await postAction(pending.path, pending.body);
    setBusy(false);
    setResult(answer.ok ? { ok: true, text: answer.message } : { ok: false, text: answer.error });
  };

  let form = null;
  if (!pending && action === "roles") {
    form = (
      <div class="form">
        {roleNames.map((role) => {
          const held = node.roles.includes(role);
          const value = roles[role];
          return (
            <label key={role}>
              {role} ({held ? "held" : "not held"}):{" "}
              <select
                data-role={role}
                value={value === undefined ? "keep" : value ? "on" : "off"}
                onChange={(e) => {
                  const v = e.currentTarget.value;
                  setRoles({ ...roles, [role]: v === "keep" ? undefined : v === "on" });
                }}
              >
                <option value="keep">keep</option>
                <option value="on">on</option>
                <option value="off">off</option>
              </select>
            </label>
          );
        })}
        <button
          onClick={() => {
            const change = Object.fromEntries(
              Object.entries(roles).filter(([, v]) => v !== undefined),
            );
            const words = Object.entries(change).map(([r, on]) => `${r} ${on ? "on" : "off"}`);
            setPending({
              title: `Change roles of ${node.id}: ${words.join(", ") || "nothing"}?`,
              path: `${base}/roles`,
              body: change,
            });
          }}
        >
          Review…
        </button>
      </div>
    );
  } else if (!pending && action === "labels") {
    form = (
      <div class="form">
        <p>
          Current:{" "}
          {Object.entries(node.labels)
            .map(([k, v]) => `${k}=${v}`)
            .join(", ") || "none"}
        </p>
        <label>
          Changes (key=value sets, key- removes, separated by spaces):{" "}
          <input
            data-testid="label-changes"
            value={labels}
            onInput={(e) => setLabels(e.currentTarget.value)}
          />
        </label>
        <button
          onClick={() => {
            const changes = labels.split(/\s+/).filter((c) => c !== "");
            setPending({
              title: `Change labels of ${node.id}: ${changes.join(" ") || "nothing"}?`,
              path: `${base}/labels`,
              body: { changes },
            });
          }}
        >
          Review…
        </button>
      </div>
    );
  }

  return (
    <div class="dialog-backdrop">
      <div class="dialog" role="dialog" aria-modal="true" data-testid="action-dialog">
        {form}
        {pending && !result && (
          <div>
            <p>{pending.title}</p>
            <button data-testid="confirm" disabled={busy} onClick={() => void confirm()}>
              {busy ? "Sending…" : "Confirm"}
            </button>{" "}
            <button onClick={props.onClose}>Cancel</button>
          </div>
        )}
        {result && (
          <div>
            <p class={result.ok ? "ok" : "error"} data-testid="action-result">
              {result.text}
            </p>
            <button onClick={props.onClose}>Close</button>
          </div>
        )}
        {!pending && !result && <button onClick={props.onClose}>Cancel</button>}
      </div>
    </div>
  );
}
