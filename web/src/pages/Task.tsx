import { useCallback, useEffect, useState } from "preact/hooks";
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
