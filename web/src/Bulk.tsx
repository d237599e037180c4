import { useRef, useState } from "preact/hooks";
import { api, describe, ok } from "./api";
import type { components } from "./api/schema";
import { enc } from "./router";
import { Link } from "./ui";

export type BulkRetry = components["schemas"]["BulkRetry"];
export type BulkRevoke = components["schemas"]["BulkRevoke"];
export type BulkResult = { kind: "retry"; r: BulkRetry } | { kind: "revoke"; r: BulkRevoke } | { kind: "error"; text: string };

// BulkQuery is what selects the tasks of a bulk operation: the filters of
// GET /api/tasks, and optionally a list of task ids, ANDed with them.
export type BulkQuery = {
  taskname?: string;
  workername?: string;
  state?: string;
  search?: string;
  received_start?: string;
  received_end?: string;
  ids?: string[];
};

// The largest selection the server acts on (the max parameter's bound).
const maxBulk = 10000;

// Bulk asks the server first (a dry run), shows how many tasks the action
// will take in a confirmation, and then acts with max set to that count:
// should more match by then, the server refuses and nothing is done.
export function Bulk(props: {
  name: string;
  label: string;
  verb: string;
  what: string;
  query: BulkQuery;
  path: "/api/tasks/retry" | "/api/tasks/revoke";
  onDone: (r: BulkResult) => void;
  disabled?: boolean;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const [count, setCount] = useState<number | null>(null);
  const [busy, setBusy] = useState(false);
  // The query is the one the dry run counted: a selection changed while
  // the confirmation is open does not change what is acted on.
  const asked = useRef<BulkQuery>(props.query);
  const call = (q: BulkQuery, dry: boolean, max: number) => {
    const query: Record<string, unknown> = { dry_run: dry, max };
    for (const [k, v] of Object.entries(q)) if (v != null && v !== "") query[k] = v;
    return ok(
      api.POST(props.path as "/api/tasks/retry", {
        params: { query: query as any },
        // The spec's ids are one comma-separated parameter (csv), not one
        // parameter per id.
        querySerializer: { array: { style: "form", explode: false } },
      }),
    );
  };
  const ask = async () => {
    setBusy(true);
    asked.current = props.query;
    try {
      const r = await call(asked.current, true, maxBulk);
      setCount(r.matched);
      ref.current?.showModal();
    } catch (e) {
      props.onDone({ kind: "error", text: describe(e) });
    } finally {
      setBusy(false);
    }
  };
  const act = async () => {
    if (!count) return;
    setBusy(true);
    try {
      const r = await call(asked.current, false, count);
      props.onDone(props.path === "/api/tasks/retry" ? { kind: "retry", r: r as BulkRetry } : { kind: "revoke", r: r as unknown as BulkRevoke });
    } catch (e) {
      props.onDone({ kind: "error", text: describe(e) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button type="button" disabled={busy || props.disabled} data-action={props.name} onClick={() => void ask()}>
        {props.label}
      </button>
      <dialog ref={ref} aria-label={props.label}>
        <form method="dialog">
          <p data-dry-run={count ?? ""}>
            {count
              ? `This will ${props.verb} ${count} ${count === 1 ? "task" : "tasks"}: the ${props.what}.`
              : `No task to ${props.verb}: no ${props.what}.`}
          </p>
          <div class="row">
            <button value="cancel" type="submit">
              Cancel
            </button>
            {!!count && (
              <button value="ok" type="submit" class="primary" data-confirm={props.name} onClick={() => void act()}>
                {props.label}
              </button>
            )}
          </div>
        </form>
      </dialog>
    </>
  );
}

// BulkResultView shows what a bulk operation did: how many tasks it took,
// the new id of each task sent again (linked), and those skipped, with
// the server's reason.
export function BulkResultView({ result, open }: { result: BulkResult; open?: boolean }) {
  if (result.kind === "error")
    return (
      <div class="error" role="alert">
        {result.text}
      </div>
    );
  if (result.kind === "revoke")
    return (
      <div class="answer ok" role="status" data-answer data-count={result.r.revoked.length}>
        Revoked {result.r.revoked.length} of {result.r.matched} {result.r.matched === 1 ? "task" : "tasks"}.
      </div>
    );
  const sent = Object.entries(result.r.retried ?? {});
  const skipped = Object.entries(result.r.skipped ?? {});
  return (
    <div class="answer ok" role="status" data-answer data-count={sent.length}>
      <p>
        Sent {sent.length} of {result.r.matched} {result.r.matched === 1 ? "task" : "tasks"} again
        {skipped.length ? `; ${skipped.length} skipped` : ""}.
      </p>
      {!!sent.length && (
        <details open={open}>
          <summary>New ids</summary>
          <table class="kv" aria-label="Sent again">
            <tbody>
              {sent.map(([old, id]) => (
                <tr key={old} data-retried={id}>
                  <th scope="row"><Link to={"/task/" + enc(old)}>{old}</Link></th>
                  <td>→ <Link to={"/task/" + enc(id)}>{id}</Link></td>
                </tr>
              ))}
            </tbody>
          </table>
        </details>
      )}
      {!!skipped.length && (
        <table class="kv" aria-label="Skipped">
          <tbody>
            {skipped.map(([old, why]) => (
              <tr key={old} data-skipped={old}>
                <th scope="row"><Link to={"/task/" + enc(old)}>{old}</Link></th>
                <td>{why}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
