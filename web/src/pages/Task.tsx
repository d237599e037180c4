import { useCallback, useEffect, useState } from "preact/hooks";
import { describe } from "../api";
import { Graph } from "../Graph";
import { api, ok, type Task as T } from "../api";
import { onEvent, onResync, throttle } from "../events";
import { canWrite, fmtTime, fmtTitle } from "../state";
import { enc, navigate } from "../router";
import { Answer, Confirm, Copy, ErrorBox, Link, StateBadge, useAction, useTitle } from "../ui";

const times = ["sent", "received", "started", "succeeded", "failed", "retried", "revoked", "rejected", "timestamp"] as const;
const texts = ["args", "kwargs", "result", "exception", "traceback"] as const;
const plain = ["eta", "expires", "retries", "runtime", "exchange", "routing_key", "client", "clock"] as const;
const labels: Record<string, string> = {
  eta: "ETA",
  expires: "Expires",
  retries: "Retries",
  runtime: "Runtime (s)",
  exchange: "Exchange",
  routing_key: "Routing key",
  client: "Client",
  clock: "Clock",
};

export function Task({ id }: { id: string }) {
  useTitle("Task " + id);
  const [task, setTask] = useState<T | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [outcome, busy, run] = useAction();

  const load = useCallback(async () => {
    try {
      setTask(await ok(api.GET("/api/task/info/{taskid}", { params: { path: { taskid: id } } })));
      setError(null);
    } catch (e) {
      setError(e);
    }
  }, [id]);
  useEffect(() => {
    void load();
    const again = throttle(() => void load(), 300);
    const off = onEvent((ev) => {
      if (ev.uuid === id) again();
    });
    const offRe = onResync(() => void load());
    return () => {
      off();
      offRe();
    };
  }, [id]);

  const s = task?.state ?? "";
  const write = canWrite.value;
  const waiting = ["PENDING", "RECEIVED", "RETRY"].includes(s);
  const running = s === "STARTED";
  const done = ["FAILURE", "REVOKED", "REJECTED", "SUCCESS"].includes(s);
  const path = { taskid: id };
  return (
    <section>
      <p class="crumbs">
        <Link to="/tasks">Tasks</Link> /
      </p>
      <h1 class="wrap">
        <span data-field="name">{task?.name ?? "Task"}</span> {task && <StateBadge state={s} />}
      </h1>
      <p class="wrap">
        <code data-field="uuid">{id}</code> <Copy text={id} label="Copy the task id" />
      </p>
      <ErrorBox error={error} />
      {task && write && (
        <div class="toolbar">
          {(waiting || running) && (
            <Confirm name="revoke" label="Revoke" question={<>Revoke task <b>{id}</b>? A worker skips it when it comes.</>}
              onConfirm={() => run(() => ok(api.POST("/api/task/revoke/{taskid}", { params: { path } })), load)} />
          )}
          {running && (
            <Confirm name="terminate" danger label="Terminate" question={<>Terminate task <b>{id}</b>? Its process gets SIGTERM.</>}
              onConfirm={() => run(() => ok(api.POST("/api/task/revoke/{taskid}", { params: { path, query: { terminate: true } } })), load)} />
          )}
          {running && (
            <Confirm name="abort" label="Abort" question={<>Abort task <b>{id}</b>? Only an AbortableTask checks for this.</>}
              onConfirm={() => run(() => ok(api.POST("/api/task/abort/{taskid}", { params: { path } })), load)} />
          )}
          {done && (
            <Confirm name="retry" label="Retry" question={<>Send task <b>{id}</b> again, under a new id?</>}
              onConfirm={() =>
                run(async () => {
                  const r = await ok(api.POST("/api/task/retry/{taskid}", { params: { path } }));
                  navigate("/task/" + enc(r["task-id"]));
                  return { message: "Sent again as " + r["task-id"] };
                })
              } />
          )}
        </div>
      )}
      <Answer outcome={outcome} />
      {busy && <p class="muted">Working…</p>}
      {task && write && done && task.name && <EditedRetry key={id} task={task} />}
      {task && (
        <>
          <table class="kv" aria-label="Task">
            <tbody>
              <tr>
                <th scope="row">State</th>
                <td data-field="state">{s}</td>
              </tr>
              <tr>
                <th scope="row">Worker</th>
                <td data-field="worker">{task.worker ? <Link to={"/worker/" + enc(task.worker)}>{task.worker}</Link> : ""}</td>
              </tr>
              {task.parent_id && (
                <tr>
                  <th scope="row">Parent</th>
                  <td><Link to={"/task/" + enc(task.parent_id)}>{task.parent_id}</Link></td>
                </tr>
              )}
              {task.root_id && (
                <tr>
                  <th scope="row">Root</th>
                  <td><Link to={"/task/" + enc(task.root_id)}>{task.root_id}</Link></td>
                </tr>
              )}
              {!!task.children?.length && (
                <tr>
                  <th scope="row">Children</th>
                  <td>
                    {task.children.map((c) => (
                      <div key={c}><Link to={"/task/" + enc(c)}>{c}</Link></div>
                    ))}
                  </td>
                </tr>
              )}
              {times.map((k) =>
                task[k] != null ? (
                  <tr key={k}>
                    <th scope="row">{k[0].toUpperCase() + k.slice(1)}</th>
                    <td><time title={fmtTitle(task[k] as number)}>{fmtTime(task[k] as number)}</time></td>
                  </tr>
                ) : null,
              )}
              {plain.map((k) =>
                task[k] != null ? (
                  <tr key={k}>
                    <th scope="row">{labels[k]}</th>
                    <td data-field={k}>{String(task[k])}</td>
                  </tr>
                ) : null,
              )}
            </tbody>
          </table>
          <Graph task={task} />
          {texts.map((k) =>
            task[k] != null ? (
              <div key={k} class="block">
                <h2>
                  {k[0].toUpperCase() + k.slice(1)} {k === "traceback" && <Copy text={String(task[k])} label="Copy the traceback" />}
                </h2>
                <pre data-field={k}>{String(task[k])}</pre>
              </div>
            ) : null,
          )}
        </>
      )}
    </section>
  );
}

// pyToJSON reads the common Python reprs Celery sends for args and kwargs
// (tuples, lists, dicts, strings, numbers, True/False/None) as JSON, for a
// first draft in the editor; anything else leaves the editor for the
// person to fill.
export function pyToJSON(repr: string | null | undefined, fallback: string): string {
  if (!repr) return fallback;
  let out = "";
  for (let i = 0; i < repr.length; i++) {
    const c = repr[i];
    if (c === "'" || c === '"') {
      let j = i + 1;
      let str = "";
      for (; j < repr.length && repr[j] !== c; j++) {
        if (repr[j] === "\\" && j + 1 < repr.length) {
          const n = repr[++j];
          str += n === "n" ? "\n" : n === "t" ? "\t" : n;
        } else str += repr[j];
      }
      if (j >= repr.length) return fallback;
      out += JSON.stringify(str);
      i = j;
    } else if (c === "(") out += "[";
    else if (c === ")") out += "]";
    else if (repr.startsWith("True", i)) (out += "true"), (i += 3);
    else if (repr.startsWith("False", i)) (out += "false"), (i += 4);
    else if (repr.startsWith("None", i)) (out += "null"), (i += 3);
    else out += c;
  }
  out = out.replace(/,\s*([\]}])/g, "$1");
  try {
    return JSON.stringify(JSON.parse(out));
  } catch {
    return fallback;
  }
}

// EditedRetry sends the task's name again with args and kwargs edited as
// JSON. POST /api/task/retry takes no args or kwargs (it resends what was
// sent), so this goes through /api/task/async-apply/{taskname}: a new
// task of the same name, on the default queue and routing.
function EditedRetry({ task }: { task: T }) {
  const [args, setArgs] = useState(() => pyToJSON(task.args, "[]"));
  const [kwargs, setKwargs] = useState(() => pyToJSON(task.kwargs, "{}"));
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const check = (): { args: unknown[]; kwargs: Record<string, unknown> } | string => {
    let a: unknown, k: unknown;
    try {
      a = JSON.parse(args);
    } catch (e) {
      return "Args is not valid JSON: " + (e as Error).message;
    }
    if (!Array.isArray(a)) return "Args must be a JSON array, like [1, 2].";
    try {
      k = JSON.parse(kwargs);
    } catch (e) {
      return "Kwargs is not valid JSON: " + (e as Error).message;
    }
    if (typeof k !== "object" || k === null || Array.isArray(k)) return 'Kwargs must be a JSON object, like {"x": 1}.';
    return { args: a, kwargs: k as Record<string, unknown> };
  };
  return (
    <details class="block" data-edited-retry>
      <summary>Retry with edited arguments</summary>
      <p class="muted">
        Sends a new <code>{task.name}</code> task with these arguments through async-apply (a retry resends the original arguments
        only), on the default queue and routing.
      </p>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          const v = check();
          if (typeof v === "string") {
            setError(v);
            return;
          }
          setError(null);
          setBusy(true);
          try {
            const r = await ok(api.POST("/api/task/async-apply/{taskname}", { params: { path: { taskname: task.name as string } }, body: v }));
            navigate("/task/" + enc(r["task-id"]));
          } catch (err) {
            setError(describe(err));
          } finally {
            setBusy(false);
          }
        }}
      >
        <label class="stack">
          Args (a JSON array)
          <textarea name="args" rows={3} spellcheck={false} value={args} aria-invalid={!!error && error.startsWith("Args")}
            onInput={(e) => setArgs((e.target as HTMLTextAreaElement).value)} />
        </label>
        <label class="stack">
          Kwargs (a JSON object)
          <textarea name="kwargs" rows={3} spellcheck={false} value={kwargs} aria-invalid={!!error && error.startsWith("Kwargs")}
            onInput={(e) => setKwargs((e.target as HTMLTextAreaElement).value)} />
        </label>
        {error && (
          <p class="error" role="alert" data-invalid>
            {error}
          </p>
        )}
        <button type="submit" class="primary" disabled={busy} data-action="retry-edited">
          Send with these arguments
        </button>
      </form>
    </details>
  );
}
