import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { api, ok, type WorkerInfo } from "../api";
import { onEvent, throttle } from "../events";
import { canWrite } from "../state";
import { enc, route, setQuery } from "../router";
import { Answer, Confirm, ErrorBox, KV, Link, useAction, useTitle } from "../ui";

const tabs = ["pool", "queues", "tasks", "limits", "config", "system"] as const;
type Tab = (typeof tabs)[number];

export function Worker({ name }: { name: string }) {
  useTitle(name);
  const q = route.value.query;
  const tab: Tab = (tabs as readonly string[]).includes(q.get("tab") ?? "") ? (q.get("tab") as Tab) : "pool";
  const [info, setInfo] = useState<WorkerInfo | null>(null);
  const [alive, setAlive] = useState<boolean | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [outcome, busy, run] = useAction();
  // Loads answer out of order (a refresh waits for the worker, a plain
  // read does not): the latest load shown wins, and a status asked for
  // before the worker's latest event does not undo what the event said.
  const seq = useRef({ asked: 0, shown: 0, heard: -1 });
  const followUps = useRef<ReturnType<typeof setTimeout>[]>([]);

  const load = useCallback(
    async (refresh: boolean) => {
      const s = seq.current;
      const mine = ++s.asked;
      const since = performance.now();
      try {
        const w = (await ok(api.GET("/api/workers", { params: { query: { workername: name, refresh } } }))) as Record<string, WorkerInfo>;
        if (mine < s.shown) return;
        s.shown = mine;
        setInfo(w[name] ?? null);
        setError(null);
        const st = (await ok(api.GET("/api/workers", { params: { query: { status: true } } }))) as Record<string, boolean>;
        if (mine < s.shown || s.heard >= since) return;
        setAlive(!!st[name]);
      } catch (e) {
        if (mine >= s.shown) setError(e);
      }
    },
    [name],
  );
  useEffect(() => {
    seq.current = { asked: 0, shown: 0, heard: -1 };
    void load(false).then(() => load(true));
    const again = throttle(() => void load(false), 1000);
    const off = onEvent((ev) => {
      if (ev.hostname !== name) return;
      if (ev.type.startsWith("worker-")) seq.current.heard = performance.now();
      if (ev.type === "worker-offline") setAlive(false);
      else if (ev.type.startsWith("worker-")) {
        setAlive(true);
        if (ev.type === "worker-online") again();
      }
    });
    return () => {
      off();
      followUps.current.forEach(clearTimeout);
      followUps.current = [];
    };
  }, [name]);

  const p = { path: { workername: name } };
  // A worker answers a control before it has carried it out (a pool grows
  // and a consumer starts after the reply), and a refresh may join an
  // inspection that began before the control: the page inspects the worker
  // afresh a few times over the next seconds, so that it shows the effect.
  const refreshAfter = () => {
    followUps.current.forEach(clearTimeout);
    followUps.current = [300, 1500, 4000, 8000].map((ms) => setTimeout(() => void load(true), ms));
  };
  const write = canWrite.value;
  return (
    <section>
      <p class="crumbs">
        <Link to="/">Workers</Link> /
      </p>
      <h1 class="wrap">
        {name}{" "}
        {alive !== null && (
          <span class={alive ? "badge s-success" : "badge s-offline"} data-status>
            {alive ? "Online" : "Offline"}
          </span>
        )}
      </h1>
      <div class="toolbar">
        <button type="button" onClick={() => void load(true)}>
          Refresh
        </button>
        {write && (
          <>
            <Confirm
              name="restart-pool"
              label="Restart pool"
              question={<>Restart the pool of worker <b>{name}</b>?</>}
              onConfirm={() => run(() => ok(api.POST("/api/worker/pool/restart/{workername}", { params: p })), refreshAfter)}
            />
            <Confirm
              name="shutdown"
              danger
              label="Shut down"
              question={<>Shut down worker <b>{name}</b>? It stops and does not come back by itself.</>}
              onConfirm={() => run(() => ok(api.POST("/api/worker/shutdown/{workername}", { params: p })))}
            />
          </>
        )}
      </div>
      <Answer outcome={outcome} />
      <ErrorBox error={error} />
      <p>
        <Link to={"/tasks?workername=" + enc(name)}>Its tasks and activity charts</Link>
      </p>
      <nav class="tabs" aria-label="Worker details">
        {tabs.map((t) => (
          <a
            key={t}
            href={"?tab=" + t}
            aria-current={t === tab ? "page" : undefined}
            onClick={(e) => {
              e.preventDefault();
              setQuery({ tab: t === "pool" ? null : t });
            }}
          >
            {t[0].toUpperCase() + t.slice(1)}
          </a>
        ))}
      </nav>
      {!info && !error && <p class="muted">No inspection of this worker yet.</p>}
      {info && tab === "pool" && <Pool info={info} name={name} write={write} busy={busy} run={run} after={refreshAfter} />}
      {info && tab === "queues" && <Queues info={info} name={name} write={write} busy={busy} run={run} after={refreshAfter} />}
      {info && tab === "tasks" && <Tasks info={info} />}
      {info && tab === "limits" && <Limits info={info} name={name} write={write} busy={busy} run={run} />}
      {info && tab === "config" && <KV obj={info.conf} label="Configuration" />}
      {info && tab === "system" && <KV obj={(info.stats as any)?.rusage ?? info.stats} label="System" />}
    </section>
  );
}

type Ctl = {
  info: WorkerInfo;
  name: string;
  write: boolean;
  busy: boolean;
  run: (f: () => Promise<unknown>, after?: () => void) => Promise<void>;
  after?: () => void;
};

function Pool({ info, name, write, busy, run, after }: Ctl) {
  const stats: any = info.stats ?? {};
  const pool = stats.pool ?? {};
  const [n, setN] = useState(1);
  const [min, setMin] = useState(1);
  const [max, setMax] = useState(4);
  const p = { workername: name };
  return (
    <div>
      <table class="kv" aria-label="Pool">
        <tbody>
          {(
            [
              ["Implementation", pool.implementation],
              ["Pool size", Array.isArray(pool.processes) ? pool.processes.length : undefined, true],
              ["Max concurrency", pool["max-concurrency"]],
              ["Process ids", Array.isArray(pool.processes) ? pool.processes.join(", ") : undefined],
              ["Max tasks per child", pool["max-tasks-per-child"]],
              ["Prefetch count", stats.prefetch_count],
              ["Timeouts (soft, hard)", Array.isArray(pool.timeouts) ? pool.timeouts.join(", ") : undefined],
            ] as [string, unknown, boolean?][]
          )
            .filter(([, v]) => v !== undefined && v !== null && v !== "")
            .map(([k, v, size]) => (
              <tr key={k}>
                <th scope="row">{k}</th>
                {size ? <td data-pool-size>{String(v)}</td> : <td>{String(v)}</td>}
              </tr>
            ))}
        </tbody>
      </table>
      {write && (
        <div class="controls">
          <fieldset>
            <legend>Pool size</legend>
            <label>
              Processes <input type="number" min={1} max={1000} value={n} onInput={(e) => setN(+(e.target as HTMLInputElement).value)} />
            </label>
            <button type="button" disabled={busy} data-action="grow"
              onClick={() => run(() => ok(api.POST("/api/worker/pool/grow/{workername}", { params: { path: p, query: { n } } })), after)}>
              Grow
            </button>
            <button type="button" disabled={busy} data-action="shrink"
              onClick={() => run(() => ok(api.POST("/api/worker/pool/shrink/{workername}", { params: { path: p, query: { n } } })), after)}>
              Shrink
            </button>
          </fieldset>
          <fieldset>
            <legend>Autoscale</legend>
            <label>
              Min <input type="number" min={0} max={1000} value={min} onInput={(e) => setMin(+(e.target as HTMLInputElement).value)} />
            </label>
            <label>
              Max <input type="number" min={0} max={1000} value={max} onInput={(e) => setMax(+(e.target as HTMLInputElement).value)} />
            </label>
            <button type="button" disabled={busy} data-action="autoscale"
              onClick={() => run(() => ok(api.POST("/api/worker/pool/autoscale/{workername}", { params: { path: p, query: { min, max } } })), after)}>
              Autoscale
            </button>
          </fieldset>
        </div>
      )}
    </div>
  );
}

function Queues({ info, name, write, busy, run, after }: Ctl) {
  const [queue, setQueue] = useState("");
  const qs = (info.active_queues ?? []) as any[];
  const p = { workername: name };
  return (
    <div>
      <table class="grid" aria-label="Active queues">
        <thead>
          <tr>
            <th scope="col">Queue</th>
            <th scope="col">Exchange</th>
            <th scope="col">Routing key</th>
            <th scope="col">Durable</th>
            <th scope="col">Auto delete</th>
            <th scope="col">Exclusive</th>
            {write && <th scope="col">Consumer</th>}
          </tr>
        </thead>
        <tbody>
          {qs.map((q) => (
            <tr key={String(q.name)} data-queue={String(q.name)}>
              <td>{String(q.name ?? "")}</td>
              <td>{String(q.exchange?.name ?? "")}</td>
              <td>{String(q.routing_key ?? "")}</td>
              <td>{String(q.durable ?? "")}</td>
              <td>{String(q.auto_delete ?? "")}</td>
              <td>{String(q.exclusive ?? "")}</td>
              {write && (
                <td>
                  <button type="button" disabled={busy} data-action="cancel-consumer"
                    onClick={() => run(() => ok(api.POST("/api/worker/queue/cancel-consumer/{workername}", { params: { path: p, query: { queue: String(q.name) } } })), after)}>
                    Cancel consumer
                  </button>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {write && (
        <form class="controls" onSubmit={(e) => {
          e.preventDefault();
          void run(() => ok(api.POST("/api/worker/queue/add-consumer/{workername}", { params: { path: p, query: { queue } } })), after);
        }}>
          <label>
            Queue <input name="queue" required maxLength={255} value={queue} onInput={(e) => setQueue((e.target as HTMLInputElement).value)} />
          </label>
          <button type="submit" disabled={busy || !queue} data-action="add-consumer">
            Add consumer
          </button>
        </form>
      )}
    </div>
  );
}

function TaskList({ label, items }: { label: string; items: any[] | undefined }) {
  return (
    <>
      <h2>{label}</h2>
      {!items?.length ? (
        <p class="muted">None.</p>
      ) : (
        <table class="grid" aria-label={label}>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">UUID</th>
              <th scope="col">Args</th>
              <th scope="col">Kwargs</th>
            </tr>
          </thead>
          <tbody>
            {items.map((t, i) => {
              const r = t?.request ?? t;
              const id = typeof r === "string" ? r : String(r?.id ?? "");
              return (
                <tr key={id + i}>
                  <td>{typeof r === "string" ? "" : String(r?.name ?? "")}</td>
                  <td>{id && <Link to={"/task/" + enc(id)}>{id}</Link>}</td>
                  <td><code>{typeof r === "string" ? "" : JSON.stringify(r?.args ?? "")}</code></td>
                  <td><code>{typeof r === "string" ? "" : JSON.stringify(r?.kwargs ?? "")}</code></td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </>
  );
}

function Tasks({ info }: { info: WorkerInfo }) {
  const total = ((info.stats as any)?.total ?? {}) as Record<string, number>;
  return (
    <div>
      <h2>Processed</h2>
      <table class="grid" aria-label="Processed">
        <thead>
          <tr>
            <th scope="col">Task</th>
            <th scope="col" class="num">Processed</th>
          </tr>
        </thead>
        <tbody>
          {Object.entries(total).map(([k, v]) => (
            <tr key={k}>
              <td>{k}</td>
              <td class="num">{String(v)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <TaskList label="Active" items={info.active} />
      <TaskList label="Scheduled" items={info.scheduled} />
      <TaskList label="Reserved" items={info.reserved} />
      <h2>Revoked</h2>
      {info.revoked?.length ? (
        <ul>
          {info.revoked.map((id) => (
            <li key={id}>
              <Link to={"/task/" + enc(id)}>{id}</Link>
            </li>
          ))}
        </ul>
      ) : (
        <p class="muted">None.</p>
      )}
    </div>
  );
}

function Limits({ info, name, write, busy, run }: Ctl) {
  const [task, setTask] = useState("");
  const [rate, setRate] = useState("");
  const [soft, setSoft] = useState("");
  const [hard, setHard] = useState("");
  const reg = (info.registered ?? []).map((r) => r.split(" ")[0]);
  return (
    <div>
      <table class="grid" aria-label="Registered tasks">
        <thead>
          <tr>
            <th scope="col">Task</th>
            <th scope="col">Limits</th>
          </tr>
        </thead>
        <tbody>
          {(info.registered ?? []).map((r) => {
            const [n, ...rest] = r.split(" ");
            return (
              <tr key={r}>
                <td>{n}</td>
                <td><code>{rest.join(" ")}</code></td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {write && (
        <div class="controls">
          <label>
            Task{" "}
            <select name="task" value={task} onChange={(e) => setTask((e.target as HTMLSelectElement).value)}>
              <option value="">Choose a task</option>
              {reg.map((r) => (
                <option key={r} value={r}>{r}</option>
              ))}
            </select>
          </label>
          <fieldset>
            <legend>Rate limit</legend>
            <label>
              Rate (e.g. 10/m, empty for none) <input name="rate" value={rate} maxLength={32} onInput={(e) => setRate((e.target as HTMLInputElement).value)} />
            </label>
            <button type="button" disabled={busy || !task} data-action="rate-limit"
              onClick={() => run(() => ok(api.POST("/api/task/rate-limit/{taskname}", { params: { path: { taskname: task }, query: { workername: name, rateLimit: rate } } })))}>
              Apply rate limit
            </button>
          </fieldset>
          <fieldset>
            <legend>Time limits (seconds)</legend>
            <label>
              Soft <input name="soft" type="number" min={0} value={soft} onInput={(e) => setSoft((e.target as HTMLInputElement).value)} />
            </label>
            <label>
              Hard <input name="hard" type="number" min={0} value={hard} onInput={(e) => setHard((e.target as HTMLInputElement).value)} />
            </label>
            <button type="button" disabled={busy || !task} data-action="timeout"
              onClick={() => run(() => ok(api.POST("/api/task/timeout/{taskname}", {
                params: { path: { taskname: task }, query: { workername: name, ...(soft ? { soft: +soft } : {}), ...(hard ? { hard: +hard } : {}) } },
              })))}>
              Apply time limits
            </button>
          </fieldset>
        </div>
      )}
    </div>
  );
}
