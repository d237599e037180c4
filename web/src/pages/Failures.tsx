import { useEffect, useState } from "preact/hooks";
import { api, ok } from "../api";
import type { components } from "../api/schema";
import { onEvent, onResync, throttle } from "../events";
import { canWrite, fmtTime, fmtTitle } from "../state";
import { enc } from "../router";
import { Copy, ErrorBox, Link, useTitle } from "../ui";
import { Charts } from "../Charts";
import { Bulk, BulkResultView, type BulkResult } from "../Bulk";

type Group = components["schemas"]["FailureGroup"];

// The bulk operations filter as GET /api/tasks does, which has no filter
// by exception type: a group's actions act on every task of its name in
// the state asked, and the dry run's count says how many that is.
const waiting = "state:PENDING OR state:RECEIVED OR state:RETRY";

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
  const [result, setResult] = useState<BulkResult | null>(null);
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
      {result && <BulkResultView result={result} />}
    </article>
  );
}
