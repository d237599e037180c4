import { useEffect, useLayoutEffect, useMemo, useReducer, useRef, useState } from "preact/hooks";
import { Virtualizer, elementScroll, observeElementOffset, observeElementRect } from "@tanstack/virtual-core";
import { api, authHeaders, baseUrl, describe, ok, token, type Task } from "../api";
import { onEvent, onResync, throttle } from "../events";
import { canWrite, fmtTime, fmtTitle } from "../state";
import { enc, route, setQuery } from "../router";
import { ErrorBox, Link, StateBadge, useTitle } from "../ui";
import { Charts } from "../Charts";
import { Bulk, BulkResultView, type BulkQuery, type BulkResult } from "../Bulk";

type Col = { key: keyof Task; label: string; num?: boolean; time?: boolean };
// Flower's 17 columns.
export const columns: Col[] = [
  { key: "name", label: "Name" },
  { key: "uuid", label: "UUID" },
  { key: "state", label: "State" },
  { key: "args", label: "Args" },
  { key: "kwargs", label: "Kwargs" },
  { key: "result", label: "Result" },
  { key: "received", label: "Received", time: true },
  { key: "started", label: "Started", time: true },
  { key: "runtime", label: "Runtime", num: true },
  { key: "worker", label: "Worker" },
  { key: "exchange", label: "Exchange" },
  { key: "routing_key", label: "Routing key" },
  { key: "retries", label: "Retries", num: true },
  { key: "revoked", label: "Revoked", time: true },
  { key: "exception", label: "Exception" },
  { key: "expires", label: "Expires" },
  { key: "eta", label: "ETA" },
];
const defaultCols = ["name", "uuid", "state", "args", "kwargs", "result", "received", "started", "runtime", "worker"];
const colsKey = "stamen.tasks.columns";
const sortable = new Set(["name", "state", "received", "started"]);
const states = ["", "PENDING", "RECEIVED", "STARTED", "SUCCESS", "FAILURE", "RETRY", "REVOKED", "REJECTED"];
const sizes = [15, 30, 50, 100, 500];
const stateOf: Record<string, string> = {
  "task-sent": "PENDING",
  "task-received": "RECEIVED",
  "task-started": "STARTED",
  "task-succeeded": "SUCCESS",
  "task-failed": "FAILURE",
  "task-retried": "RETRY",
  "task-revoked": "REVOKED",
  "task-rejected": "REJECTED",
};
const ROW = 34;
// The most task ids one bulk operation takes (the spec's maxItems of ids);
// beyond, "everything matching this filter" selects by the filters.
const maxIDs = 500;

function loadCols(): string[] {
  try {
    const v = JSON.parse(localStorage.getItem(colsKey) ?? "null");
    if (Array.isArray(v) && v.every((c) => typeof c === "string")) return v.filter((c) => columns.some((k) => k.key === c));
  } catch {
    /* none saved */
  }
  return defaultCols;
}

// The received-time window: the API takes "YYYY-MM-DD HH:MM" (server local
// time); a datetime-local input gives "YYYY-MM-DDTHH:MM".
const toAPI = (v: string) => (v ? v.replace("T", " ").slice(0, 16) : undefined);

export function Tasks() {
  useTitle("Tasks");
  const q = route.value.query;
  const state = q.get("state") ?? "";
  const search = q.get("search") ?? "";
  const from = q.get("from") ?? "";
  const to = q.get("to") ?? "";
  const taskname = q.get("taskname") ?? "";
  const workername = q.get("workername") ?? "";
  const sort = q.get("sort") ?? "-received";
  const size = sizes.includes(+(q.get("size") ?? "")) ? +(q.get("size") as string) : 30;
  const page = Math.max(0, +(q.get("page") ?? "0") || 0);
  const [draft, setDraft] = useState(search);
  const [cols, setColsState] = useState<string[]>(loadCols);
  // Saved as soon as chosen, so that a reload right after keeps it.
  const setCols = (f: (c: string[]) => string[]) =>
    setColsState((prev) => {
      const next = f(prev);
      try {
        localStorage.setItem(colsKey, JSON.stringify(next));
      } catch {
        /* storage disabled */
      }
      return next;
    });
  const [rows, setRows] = useState<Task[]>([]);
  const [more, setMore] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const shown = useRef(new Set<string>());
  const write = canWrite.value;
  // The selection is task ids, kept across pages and live reloads of the
  // rows; all is "everything matching this filter" instead. Both go when
  // the filter changes: the rows selected were those of another filter.
  const [selected, setSelected] = useState<ReadonlySet<string>>(new Set());
  const [all, setAll] = useState(false);
  const [result, setResult] = useState<BulkResult | null>(null);
  useEffect(() => {
    setSelected(new Set());
    setAll(false);
    setResult(null);
  }, [state, taskname, workername, search, from, to]);

  useEffect(() => setDraft(search), [search]);

  useEffect(() => {
    let gone = false;
    let seq = 0;
    const load = async () => {
      const my = ++seq;
      try {
        const list = await ok(
          api.GET("/api/tasks", {
            params: {
              query: {
                limit: size + 1,
                offset: page * size,
                sort_by: sort as any,
                ...(state ? { state } : {}),
                ...(taskname ? { taskname } : {}),
                ...(workername ? { workername } : {}),
                ...(search ? { search } : {}),
                ...(from ? { received_start: toAPI(from) } : {}),
                ...(to ? { received_end: toAPI(to) } : {}),
              },
            },
          }),
        );
        if (gone || my !== seq) return;
        const all = Object.values(list ?? {});
        setMore(all.length > size);
        const r = all.slice(0, size);
        shown.current = new Set(r.map((t) => t.uuid));
        setRows(r);
        setError(null);
      } catch (e) {
        if (!gone && my === seq) setError(e);
      } finally {
        if (!gone && my === seq) setLoading(false);
      }
    };
    setLoading(true);
    void load();
    // Live: a task event for a row shown changes it at once; new tasks
    // and changes on the first page bring a refetch, at most every 250 ms.
    const again = throttle(() => void load(), 250);
    const offEv = onEvent((ev) => {
      if (!ev.type.startsWith("task-")) return;
      const id = typeof ev.uuid === "string" ? ev.uuid : "";
      if (shown.current.has(id)) {
        const st = stateOf[ev.type];
        if (st && !state) setRows((rs) => rs.map((t) => (t.uuid === id ? { ...t, state: st } : t)));
        again();
      } else if (page === 0) again();
    });
    const offRe = onResync(() => void load());
    return () => {
      gone = true;
      offEv();
      offRe();
    };
  }, [state, taskname, workername, search, from, to, sort, size, page]);

  const visible = columns.filter((c) => cols.includes(c.key));
  const sortBy = (k: string) => setQuery({ sort: sort === "-" + k ? k : "-" + k, page: null });
  const filters: BulkQuery = {
    ...(state ? { state } : {}),
    ...(taskname ? { taskname } : {}),
    ...(workername ? { workername } : {}),
    ...(search ? { search } : {}),
    ...(from ? { received_start: toAPI(from) } : {}),
    ...(to ? { received_end: toAPI(to) } : {}),
  };
  const toggle = (id: string, on: boolean) => {
    // Unticking a row of "everything matching" keeps the other rows shown.
    const from = all ? new Set(rows.map((t) => t.uuid)) : null;
    setAll(false);
    setSelected((prev) => {
      const next = new Set(from ?? prev);
      if (on) next.add(id);
      else next.delete(id);
      return next;
    });
  };
  const togglePage = (on: boolean) => {
    setAll(false);
    setSelected((prev) => {
      const next = new Set(prev);
      for (const t of rows) {
        if (on) next.add(t.uuid);
        else next.delete(t.uuid);
      }
      return next;
    });
  };
  const done = (r: BulkResult) => {
    setResult(r);
    if (r.kind !== "error") {
      setSelected(new Set());
      setAll(false);
    }
  };
  const tooMany = !all && selected.size > maxIDs;
  const bulkQuery: BulkQuery = all ? filters : { ids: [...selected] };
  const what = all ? "tasks matching this filter" : selected.size === 1 ? "selected task" : "selected tasks";

  return (
    <section class="tasks">
      <h1>Tasks</h1>
      <div class="chips" role="group" aria-label="State">
        {states.map((s) => (
          <button key={s} type="button" aria-pressed={state === s} onClick={() => setQuery({ state: s || null, page: null })}>
            {s ? s[0] + s.slice(1).toLowerCase() : "All"}
          </button>
        ))}
      </div>
      <form
        class="toolbar"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          setQuery({ search: draft || null, page: null });
        }}
      >
        <label class="grow">
          Search{" "}
          <input
            type="search"
            name="search"
            value={draft}
            placeholder="name:add state:FAILURE worker:w1 args:42 kwargs:k=v result:… or free text"
            onInput={(e) => setDraft((e.target as HTMLInputElement).value)}
          />
        </label>
        <button type="submit">Search</button>
        <label>
          Received from{" "}
          <input type="datetime-local" value={from} onChange={(e) => setQuery({ from: (e.target as HTMLInputElement).value || null, page: null })} />
        </label>
        <label>
          to <input type="datetime-local" value={to} onChange={(e) => setQuery({ to: (e.target as HTMLInputElement).value || null, page: null })} />
        </label>
        <ColumnChooser cols={cols} setCols={setCols} />
      </form>
      {(taskname || workername) && (
        <p class="toolbar" data-filters>
          {taskname && (
            <span>
              Task name <code>{taskname}</code>{" "}
              <button type="button" class="small" onClick={() => setQuery({ taskname: null, page: null })}>
                Clear the task name
              </button>
            </span>
          )}
          {workername && (
            <span>
              Worker <code>{workername}</code>{" "}
              <button type="button" class="small" onClick={() => setQuery({ workername: null, page: null })}>
                Clear the worker
              </button>
            </span>
          )}
        </p>
      )}
      {(taskname || workername) && <Charts filter={{ taskname, workername }} />}
      <Export
        query={{
          sort_by: sort,
          ...(state ? { state } : {}),
          ...(taskname ? { taskname } : {}),
          ...(workername ? { workername } : {}),
          ...(search ? { search } : {}),
          ...(from ? { received_start: toAPI(from) } : {}),
          ...(to ? { received_end: toAPI(to) } : {}),
        }}
      />
      {write && (
        <div class="toolbar bulk" role="group" aria-label="Selected tasks" data-bulk>
          <span aria-live="polite" data-selected={all ? "all" : selected.size}>
            {all ? "Every task matching this filter is selected" : `${selected.size} selected`}
          </span>
          <button type="button" class="small" aria-pressed={all} data-action="select-matching" onClick={() => setAll(true)}>
            Select everything matching this filter
          </button>
          <button
            type="button"
            class="small"
            disabled={!all && !selected.size}
            onClick={() => {
              setAll(false);
              setSelected(new Set());
            }}
          >
            Clear the selection
          </button>
          <Bulk
            name="bulk-retry"
            label="Retry"
            verb="retry"
            what={what + " (each sent again under a new id, with the same arguments)"}
            query={bulkQuery}
            path="/api/tasks/retry"
            onDone={done}
            disabled={(!all && !selected.size) || tooMany}
          />
          <Bulk
            name="bulk-revoke"
            label="Revoke"
            verb="revoke"
            what={what + " (a worker skips a revoked task that has not started)"}
            query={bulkQuery}
            path="/api/tasks/revoke"
            onDone={done}
            disabled={(!all && !selected.size) || tooMany}
          />
          {tooMany && (
            <span class="error" role="alert">
              At most {maxIDs} tasks can be selected one by one: select everything matching a filter instead.
            </span>
          )}
        </div>
      )}
      {write && result && <BulkResultView result={result} open />}
      <ErrorBox error={error} />
      <VirtualTable
        rows={rows}
        visible={visible}
        sort={sort}
        sortBy={sortBy}
        select={write ? { selected, all, toggle, togglePage } : null}
      />
      {!rows.length && !loading && !error && <p class="muted">No task matches.</p>}
      <div class="toolbar pager">
        <button type="button" disabled={page === 0} onClick={() => setQuery({ page: page - 1 || null })}>
          Previous
        </button>
        <span aria-live="polite">
          Page {page + 1}
          {rows.length ? `, tasks ${page * size + 1}–${page * size + rows.length}` : ""}
        </span>
        <button type="button" disabled={!more} onClick={() => setQuery({ page: page + 1 })}>
          Next
        </button>
        <label>
          Per page{" "}
          <select value={size} onChange={(e) => setQuery({ size: (e.target as HTMLSelectElement).value, page: null })}>
            {sizes.map((s) => (
              <option key={s} value={s}>{s}</option>
            ))}
          </select>
        </label>
      </div>
    </section>
  );
}

function ColumnChooser({ cols, setCols }: { cols: string[]; setCols: (f: (c: string[]) => string[]) => void }) {
  return (
    <details class="chooser">
      <summary>Columns</summary>
      <div class="menu">
        {columns.map((c) => (
          <label key={c.key}>
            <input
              type="checkbox"
              value={c.key}
              checked={cols.includes(c.key)}
              onChange={(e) =>
                setCols((prev) =>
                  (e.target as HTMLInputElement).checked ? [...prev.filter((k) => k !== c.key), c.key] : prev.filter((k) => k !== c.key),
                )
              }
            />{" "}
            {c.label}
          </label>
        ))}
        <button type="button" class="small" onClick={() => setCols(() => defaultCols)}>
          Reset
        </button>
      </div>
    </details>
  );
}

function cell(t: Task, c: Col) {
  const v = t[c.key];
  if (c.key === "state") return <StateBadge state={t.state} />;
  if (c.key === "uuid") return <Link to={"/task/" + enc(t.uuid)}>{t.uuid}</Link>;
  if (c.key === "name") return <Link to={"/task/" + enc(t.uuid)}>{t.name ?? ""}</Link>;
  if (c.key === "worker" && t.worker) return <Link to={"/worker/" + enc(t.worker)}>{t.worker}</Link>;
  if (c.time) return <time title={fmtTitle(v as number)}>{fmtTime(v as number)}</time>;
  if (c.key === "runtime" && typeof v === "number") return v.toFixed(3);
  return v == null ? "" : String(v);
}

// VirtualTable renders only the rows in view (TanStack Virtual), so a page
// of hundreds of rows stays cheap to update live.
type Selection = {
  selected: ReadonlySet<string>;
  all: boolean;
  toggle: (id: string, on: boolean) => void;
  togglePage: (on: boolean) => void;
};

function VirtualTable(props: { rows: Task[]; visible: Col[]; sort: string; sortBy: (k: string) => void; select: Selection | null }) {
  const { rows, visible, sort, sortBy, select } = props;
  const span = visible.length + (select ? 1 : 0);
  const pageSelected = !!select && rows.length > 0 && (select.all || rows.every((t) => select.selected.has(t.uuid)));
  const pageSome = !!select && !pageSelected && rows.some((t) => select.selected.has(t.uuid));
  const scroller = useRef<HTMLDivElement>(null);
  const [, rerender] = useReducer((x: number) => x + 1, 0);
  const v = useMemo(
    () =>
      new Virtualizer<HTMLDivElement, HTMLTableRowElement>({
        count: 0,
        getScrollElement: () => scroller.current,
        estimateSize: () => ROW,
        overscan: 10,
        scrollToFn: elementScroll,
        observeElementRect,
        observeElementOffset,
        onChange: () => rerender(0),
        initialRect: { width: 1200, height: 600 },
      }),
    [],
  );
  v.setOptions({ ...v.options, count: rows.length, getItemKey: (i) => rows[i]?.uuid ?? i });
  useLayoutEffect(() => v._didMount(), []);
  useLayoutEffect(() => v._willUpdate());
  const items = v.getVirtualItems();
  const top = items.length ? items[0].start : 0;
  const bottom = items.length ? v.getTotalSize() - items[items.length - 1].end : 0;
  return (
    <div class="scroll vtable" ref={scroller}>
      <table class="grid" aria-label="Tasks" aria-rowcount={rows.length + 1}>
        <thead>
          <tr>
            {select && (
              <th scope="col" class="sel">
                <input
                  type="checkbox"
                  aria-label="Select every task on this page"
                  data-select-page
                  checked={pageSelected}
                  indeterminate={pageSome}
                  disabled={!rows.length}
                  onChange={(e) => select.togglePage((e.target as HTMLInputElement).checked)}
                />
              </th>
            )}
            {visible.map((c) => {
              const dir = sort === c.key ? "ascending" : sort === "-" + c.key ? "descending" : undefined;
              return (
                <th key={c.key} scope="col" class={c.num ? "num" : ""} aria-sort={dir}>
                  {sortable.has(c.key) ? (
                    <button type="button" class="sort" onClick={() => sortBy(c.key)}>
                      {c.label} {dir === "ascending" ? "▲" : dir === "descending" ? "▼" : ""}
                    </button>
                  ) : (
                    c.label
                  )}
                </th>
              );
            })}
          </tr>
        </thead>
        <tbody>
          {top > 0 && (
            <tr aria-hidden="true" style={{ height: top + "px" }}>
              <td colSpan={span} />
            </tr>
          )}
          {items.map((it) => {
            const t = rows[it.index];
            if (!t) return null;
            return (
              <tr key={t.uuid} data-task={t.uuid} data-state={t.state} style={{ height: ROW + "px" }}>
                {select && (
                  <td class="sel">
                    <input
                      type="checkbox"
                      aria-label={"Select task " + t.uuid}
                      data-select={t.uuid}
                      checked={select.all || select.selected.has(t.uuid)}
                      onChange={(e) => select.toggle(t.uuid, (e.target as HTMLInputElement).checked)}
                    />
                  </td>
                )}
                {visible.map((c) => (
                  <td key={c.key} class={(c.num ? "num " : "") + "c-" + c.key}>
                    {cell(t, c)}
                  </td>
                ))}
              </tr>
            );
          })}
          {bottom > 0 && (
            <tr aria-hidden="true" style={{ height: bottom + "px" }}>
              <td colSpan={span} />
            </tr>
          )}
        </tbody>
      </table>
    </div>
  );
}

// Export offers the list with the current filters as a file the server
// streams. A plain download link carries the browser's own credentials
// (cookie, basic auth, client certificate) but not a bearer token this tab
// holds: with one, the file is fetched with the token and saved from a Blob.
function Export({ query }: { query: Record<string, string | undefined> }) {
  const [error, setError] = useState<string | null>(null);
  const url = (format: string) => {
    const u = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v) u.set(k, v);
    u.set("format", format);
    return baseUrl + "/api/tasks?" + u.toString();
  };
  const viaFetch = async (e: MouseEvent, format: string, file: string) => {
    if (!token()) return;
    e.preventDefault();
    try {
      const r = await fetch(url(format), { headers: authHeaders() });
      if (!r.ok) throw new Error(`${r.status} ${r.statusText}`);
      const blob = await r.blob();
      const a = document.createElement("a");
      a.href = URL.createObjectURL(blob);
      a.download = file;
      a.click();
      setTimeout(() => URL.revokeObjectURL(a.href), 10000);
      setError(null);
    } catch (err) {
      setError("The export failed: " + describe(err));
    }
  };
  return (
    <div class="toolbar" data-export>
      <a href={url("csv")} download="tasks.csv" data-format="csv" onClick={(e) => void viaFetch(e as unknown as MouseEvent, "csv", "tasks.csv")}>
        Export CSV
      </a>
      <a href={url("jsonl")} download="tasks.jsonl" data-format="jsonl" onClick={(e) => void viaFetch(e as unknown as MouseEvent, "jsonl", "tasks.jsonl")}>
        Export JSON lines
      </a>
      {error && <span class="error" role="alert">{error}</span>}
    </div>
  );
}
