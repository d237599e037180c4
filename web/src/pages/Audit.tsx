import { useEffect, useState } from "preact/hooks";
import { api, ok } from "../api";
import type { components } from "../api/schema";
import { onEvent, onResync, throttle } from "../events";
import { route, setQuery } from "../router";
import { session } from "../state";
import { ErrorBox, useTitle } from "../ui";

type Rec = components["schemas"]["AuditRecord"];

// The audit log, newest first, with the filters of GET /api/audit in the
// URL. Operators only: the server answers 403 to a viewer, and the nav
// hides the page from one.
export function Audit() {
  useTitle("Audit");
  const q = route.value.query;
  const operation = q.get("operation") ?? "";
  const user = q.get("user") ?? "";
  const since = q.get("since") ?? "";
  const until = q.get("until") ?? "";
  const [recs, setRecs] = useState<Rec[] | null>(null);
  const [error, setError] = useState<unknown>(null);

  useEffect(() => {
    let gone = false;
    const load = async () => {
      try {
        const r = await ok(
          api.GET("/api/audit", {
            params: {
              query: {
                limit: 200,
                ...(operation ? { operation } : {}),
                ...(user ? { user } : {}),
                ...(since ? { since: new Date(since).toISOString() } : {}),
                ...(until ? { until: new Date(until).toISOString() } : {}),
              },
            },
          }),
        );
        if (gone) return;
        setRecs(r.records ?? []);
        setError(null);
      } catch (e) {
        if (!gone) setError(e);
      }
    };
    void load();
    // A write through stamen shows in the events it causes (a task sent,
    // revoked, a worker told to act): refetch then, at most every 2 s.
    const again = throttle(() => void load(), 2000);
    const off = onEvent(() => again());
    const offRe = onResync(() => void load());
    return () => {
      gone = true;
      off();
      offRe();
    };
  }, [operation, user, since, until]);

  if (session.value?.role !== "operator")
    return (
      <section>
        <h1>Audit</h1>
        <p class="muted">The audit log is for operators.</p>
      </section>
    );
  return (
    <section>
      <h1>Audit</h1>
      <form
        class="toolbar"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          const f = e.currentTarget.elements;
          const v = (n: string) => (f.namedItem(n) as HTMLInputElement).value.trim() || null;
          setQuery({ operation: v("operation"), user: v("user"), since: v("since"), until: v("until") });
        }}
      >
        <label>
          Operation <input name="operation" defaultValue={operation} placeholder="e.g. retryTasks" />
        </label>
        <label>
          User <input name="user" defaultValue={user} />
        </label>
        <label>
          Since <input type="datetime-local" name="since" defaultValue={since} />
        </label>
        <label>
          Until <input type="datetime-local" name="until" defaultValue={until} />
        </label>
        <button type="submit">Filter</button>
      </form>
      <ErrorBox error={error} />
      {recs && !recs.length && <p class="muted">No record matches.</p>}
      {recs && !!recs.length && (
        <div class="scroll">
          <table aria-label="Audit">
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">User</th>
                <th scope="col">Role</th>
                <th scope="col">Operation</th>
                <th scope="col">Status</th>
                <th scope="col">Count</th>
                <th scope="col">Parameters</th>
                <th scope="col">From</th>
              </tr>
            </thead>
            <tbody>
              {recs.map((r, i) => (
                <tr key={r.time + i} data-operation={r.operation}>
                  <td><time>{r.time}</time></td>
                  <td>{r.user}</td>
                  <td>{r.role}</td>
                  <td data-field="operation">{r.operation}</td>
                  <td data-field="status">{r.status}</td>
                  <td data-field="count">{r.count ?? ""}</td>
                  <td><code>{r.params ? JSON.stringify(r.params) : ""}</code></td>
                  <td>{r.remote}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
