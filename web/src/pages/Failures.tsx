import { useEffect, useRef, useState } from "preact/hooks";
import { api, describe, ok } from "../api";
import type { components } from "../api/schema";
import { onEvent, onResync, throttle } from "../events";
import { canWrite, fmtTime, fmtTitle } from "../state";
import { enc } from "../router";
import { Copy, ErrorBox, Link, useTitle } from "../ui";
import { Charts } from "../Charts";

type Group = components["schemas"]["FailureGroup"];
type BulkRetry = components["schemas"]["BulkRetry"];
type BulkRevoke = components["schemas"]["BulkRevoke"];

// The bulk operations filter as GET /api/tasks does, which has no filter
// by exception type: a group's actions act on every task of its name in
// the state asked, and the dry run's count says how many that is.
const waiting = "state:PENDING OR state:RECEIVED OR state:RETRY";

type Result = { kind: "retry"; r: BulkRetry } | { kind: "revoke"; r: BulkRevoke } | { kind: "error"; text: string };

export function Failures() {
  useTitle("Failures");
  const [groups, setGroups] = useState<Group[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [taskname, setTaskname] = useState("");

  useEffect(() => {
    let gone = false;
    const load = async () => {
      try {
        const r = await ok(api.GET("/api/failures", { params: { query: taskname ? { taskname } : {} } }));
        if (gone) return;
        setGroups(r.groups ?? []);
        setError(null);
      } catch (e) {
        if (!gone) setError(e);
      }
    };
    void load();
    // A new failure changes the groups: refetch, at most every 2 s.
    const again = throttle(() => void load(), 2000);
    const off = onEvent((ev) => {
      if (ev.type === "task-failed") again();
    });
    const offRe = onResync(() => void load());
    return () => {
      gone = true;
      off();
      offRe();
    };
  }, [taskname]);

  return (
    <section>
      <h1>Failures</h1>
      <p class="muted">Failed tasks grouped by task name and exception type, most frequent first.</p>
      <form
        class="toolbar"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          const v = (e.currentTarget.elements.namedItem("taskname") as HTMLInputElement).value.trim();
          setTaskname(v);
        }}
      >
        <label class="grow">
          Task name <input type="search" name="taskname" placeholder="all task names" />
        </label>
        <button type="submit">Filter</button>
      </form>
      <ErrorBox error={error} />
      {groups && !groups.length && <p class="muted">No failed task.</p>}
      {groups?.map((g) => <GroupView key={g.taskname + "\x00" + g.exception_type} g={g} />)}
    </section>
  );
}

function GroupView({ g }: { g: Group }) {
  const write = canWrite.value;
  const [result, setResult] = useState<Result | null>(null);
  // The chart is drawn (and fetched) only when opened.
  const [chart, setChart] = useState(false);
  const tasksLink = "/tasks?taskname=" + enc(g.taskname) + "&state=FAILURE";
  return (
    <article class="group" data-group={g.taskname + " " + g.exception_type}>
      <h2 class="wrap">
        <span data-field="taskname">{g.taskname}</span> · <span data-field="exception_type">{g.exception_type}</span>
      </h2>
      <table class="kv" aria-label={"Failures of " + g.taskname}>
        <tbody>
          <tr>
            <th scope="row">Count</th>
            <td data-field="count">{g.count}</td>
          </tr>
          <tr>
            <th scope="row">First seen</th>
            <td><time title={fmtTitle(g.first)}>{fmtTime(g.first)}</time></td>
          </tr>
          <tr>
            <th scope="row">Last seen</th>
            <td><time title={fmtTitle(g.last)}>{fmtTime(g.last)}</time></td>
          </tr>
          {!!g.examples?.length && (
            <tr>
              <th scope="row">Newest</th>
              <td>
                {g.examples.map((id) => (
                  <div key={id}><Link to={"/task/" + enc(id)}>{id}</Link></div>
                ))}
              </td>
            </tr>
          )}
        </tbody>
      </table>
      {g.traceback && (
        <details class="block">
          <summary>Traceback of the newest</summary>
          <Copy text={g.traceback} label="Copy the traceback" />
          <pre data-field="traceback">{g.traceback}</pre>
        </details>
      )}
      <details class="block" data-activity onToggle={(e) => setChart((e.currentTarget as HTMLDetailsElement).open)}>
        <summary>Activity of {g.taskname}</summary>
        {chart && <Charts filter={{ taskname: g.taskname }} />}
      </details>
      <div class="toolbar">
        <Link to={tasksLink}>Open its tasks</Link>
        {write && (
          <>
            <Bulk
              name="retry-all"
              label="Retry all"
              verb="retry"
              what={`failed ${g.taskname} tasks (of every exception type: the bulk operations do not filter by it)`}
              query={{ taskname: g.taskname, state: "FAILURE" }}
              path="/api/tasks/retry"
              onDone={setResult}
            />
            <Bulk
              name="revoke-pending"
              label="Revoke pending"
              verb="revoke"
              what={`${g.taskname} tasks still waiting (pending, received or retrying)`}
              query={{ taskname: g.taskname, search: waiting }}
              path="/api/tasks/revoke"
              onDone={setResult}
            />
          </>
        )}
      </div>
      {result && <ResultView result={result} />}
    </article>
  );
}

type BulkQuery = { taskname: string; state?: string; search?: string };

// Bulk asks the server first (a dry run), shows how many tasks the action
// will take in a confirmation, and then acts with max set to that count:
// should more match by then, the server refuses and nothing is done.
function Bulk(props: {
  name: string;
  label: string;
  verb: string;
  what: string;
  query: BulkQuery;
  path: "/api/tasks/retry" | "/api/tasks/revoke";
  onDone: (r: Result) => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const [count, setCount] = useState<number | null>(null);
  const [busy, setBusy] = useState(false);
  const call = (dry: boolean, max: number) =>
    ok(api.POST(props.path as "/api/tasks/retry", { params: { query: { ...props.query, dry_run: dry, max } } }));
  const ask = async () => {
    setBusy(true);
    try {
      const r = await call(true, 10000);
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
      const r = await call(false, count);
      props.onDone(props.path === "/api/tasks/retry" ? { kind: "retry", r: r as BulkRetry } : { kind: "revoke", r: r as unknown as BulkRevoke });
    } catch (e) {
      props.onDone({ kind: "error", text: describe(e) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button type="button" disabled={busy} data-action={props.name} onClick={() => void ask()}>
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

function ResultView({ result }: { result: Result }) {
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
        <details>
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
