import { useEffect, useMemo, useState } from "preact/hooks";
import { api, ok, type WorkerInfo } from "../api";
import { onEvent, onResync, throttle } from "../events";
import { fmtTime, now } from "../state";
import { enc, route, setQuery } from "../router";
import { ErrorBox, Link, useTitle } from "../ui";
import { Charts } from "../Charts";

type Live = {
  alive?: boolean;
  last?: number; // ms, last heartbeat
  freq?: number;
  active?: number;
  processed?: number;
  loadavg?: number[];
};

type Counted = "succeeded" | "failed" | "retried";
type Counts = Record<Counted, number>;
const counted: Record<string, Counted> = { "task-succeeded": "succeeded", "task-failed": "failed", "task-retried": "retried" };
// Past this many events held while a count load is in flight, they are
// not kept (the next answer holds them).
const maxHeld = 20000;

function processed(info: WorkerInfo | undefined): number | undefined {
  const total = (info?.stats as any)?.total;
  if (!total || typeof total !== "object") return undefined;
  return Object.values(total).reduce((a: number, b) => a + (typeof b === "number" ? b : 0), 0);
}

export function Workers() {
  useTitle("Workers");
  const [infos, setInfos] = useState<Record<string, WorkerInfo>>({});
  const [live, setLive] = useState<Record<string, Live>>({});
  // Each worker's task events counted since stamen started: the latest
  // answer of GET /api/stats/workers plus the streamed events it lacks;
  // null until the first answer.
  const [counts, setCounts] = useState<Record<string, Counts> | null>(null);
  const [since, setSince] = useState<number | null>(null);
  const [error, setError] = useState<unknown>(null);
  const search = route.value.query.get("search") ?? "";

  useEffect(() => {
    let gone = false;
    // When each worker's latest worker event came (performance.now()): a
    // status answer asked for before it is older than the event and must
    // not undo it (a worker-offline followed by the answer of a reload that
    // began while the worker was still up, and that waited for a refresh).
    const heard: Record<string, number> = {};
    // The latest load whose inspections were shown, so that a slow refresh
    // does not replace a newer answer.
    let asked = 0;
    let shown = 0;
    const load = async (refresh: boolean) => {
      const mine = ++asked;
      const since = performance.now();
      try {
        const [w, st] = await Promise.all([
          ok(api.GET("/api/workers", { params: { query: refresh ? { refresh: true } : {} } })),
          ok(api.GET("/api/workers", { params: { query: { status: true } } })),
        ]);
        if (gone || mine < shown) return;
        shown = mine;
        setInfos(w as Record<string, WorkerInfo>);
        setLive((prev) => {
          const next = { ...prev };
          for (const [name, alive] of Object.entries(st as Record<string, unknown>)) {
            if ((heard[name] ?? -1) >= since) continue;
            next[name] = { ...next[name], alive: !!alive };
          }
          return next;
        });
        setError(null);
      } catch (e) {
        if (!gone) setError(e);
      }
    };
    void load(false).then(() => load(true));
    const refresh = throttle(() => void load(true), 2000);

    // The counts: the answer of GET /api/stats/workers holds every event
    // of its instance numbered up to its seq, and none past it. An event
    // that came before a load was asked for is in its answer (stamen
    // numbered it before answering), so only the events that come while
    // a load is in flight are held, to be added to its answer when they
    // are past its seq; any other event adds to what is shown at once,
    // unless it is one the shown answer holds already (the stream may lag
    // behind the answer).
    let base: { instance: string; seq: number } | null = null;
    let held: { instance: string; n: number; host: string; k: Counted }[] = [];
    let inFlight = 0;
    let countsAsked = 0;
    let countsShown = 0;
    const add = (to: Record<string, Counts>, host: string, k: Counted) => {
      const cur = to[host] ?? { succeeded: 0, failed: 0, retried: 0 };
      to[host] = { ...cur, [k]: cur[k] + 1 };
    };
    const loadCounts = async () => {
      const mine = ++countsAsked;
      if (inFlight++ === 0) held = [];
      try {
        const s = await ok(api.GET("/api/stats/workers"));
        if (gone || mine < countsShown) return;
        countsShown = mine;
        base = { instance: s.instance, seq: s.seq };
        const next: Record<string, Counts> = {};
        for (const [name, c] of Object.entries(s.workers)) {
          next[name] = { succeeded: c.succeeded, failed: c.failed, retried: c.retried };
        }
        for (const e of held) if (e.instance === s.instance && e.n > s.seq) add(next, e.host, e.k);
        setCounts(next);
        setSince(Date.parse(s.since) / 1000);
      } catch (e) {
        if (!gone) setError(e);
      } finally {
        if (--inFlight === 0) held = [];
      }
    };
    void loadCounts();
    const reloadCounts = throttle(() => void loadCounts(), 2000);

    const offEv = onEvent((ev, id) => {
      const host = typeof ev.hostname === "string" ? ev.hostname : "";
      if (!host) return;
      if (ev.type.startsWith("worker-")) {
        heard[host] = performance.now();
        setLive((prev) => {
          const cur = prev[host] ?? {};
          const n: Live = { ...cur };
          if (ev.type === "worker-offline") n.alive = false;
          else {
            n.alive = true;
            n.last = Date.now();
            if (typeof ev.freq === "number") n.freq = ev.freq;
            if (typeof ev.active === "number") n.active = ev.active;
            if (typeof ev.processed === "number") n.processed = ev.processed;
            if (Array.isArray(ev.loadavg)) n.loadavg = ev.loadavg as number[];
          }
          return { ...prev, [host]: n };
        });
        if (ev.type === "worker-online") refresh();
      } else if (counted[ev.type]) {
        const k = counted[ev.type];
        const at = id.lastIndexOf(":");
        const instance = id.slice(0, at);
        const n = Number(id.slice(at + 1));
        if (at < 0 || !Number.isSafeInteger(n)) return;
        if (inFlight > 0) {
          if (held.length < maxHeld) held.push({ instance, n, host, k });
          else reloadCounts();
        }
        if (!base) return;
        if (instance !== base.instance) {
          // The stream and the answer come from two replicas, which count
          // apart: the event cannot be placed, the counts are asked again.
          reloadCounts();
          return;
        }
        if (n <= base.seq) return;
        setCounts((prev) => {
          const next = { ...prev };
          add(next, host, k);
          return next;
        });
      }
    });
    const offRe = onResync(() => {
      void load(false);
      void loadCounts();
    });
    return () => {
      gone = true;
      offEv();
      offRe();
    };
  }, []);

  const names = useMemo(() => {
    const all = new Set([...Object.keys(infos), ...Object.keys(live)]);
    return [...all]
      .filter((n) => !search || n.toLowerCase().includes(search.toLowerCase()))
      .sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  }, [infos, live, search]);

  const t = now.value;
  const alive = (n: string) => {
    const l = live[n];
    if (!l?.alive) return false;
    // A worker is offline two heartbeat intervals after its last one, as
    // Celery's state counts it.
    if (l.last && l.freq && t - l.last > 2 * l.freq * 1000 + 1000) return false;
    return true;
  };
  const rows = names.map((n) => {
    const info = infos[n];
    const l = live[n] ?? {};
    const c = counts ? (counts[n] ?? { succeeded: 0, failed: 0, retried: 0 }) : undefined;
    return {
      name: n,
      alive: alive(n),
      active: l.active ?? info?.active?.length,
      processed: l.processed ?? processed(info),
      succeeded: c?.succeeded,
      failed: c?.failed,
      retried: c?.retried,
      loadavg: l.loadavg ?? ((info?.stats as any)?.loadavg as number[] | undefined),
    };
  });
  const sum = (k: "active" | "succeeded" | "failed") => rows.reduce((a, r) => a + (r[k] ?? 0), 0);

  return (
    <section>
      <h1>Workers</h1>
      <ErrorBox error={error} />
      <div class="cards">
        <div class="card">
          <span class="label">Online workers</span>
          <span class="value" data-card="online">{rows.filter((r) => r.alive).length}</span>
        </div>
        <div class="card">
          <span class="label">Active tasks</span>
          <span class="value">{sum("active")}</span>
        </div>
        <Link class="card" to="/tasks?state=SUCCESS">
          <span class="label">Succeeded</span>
          <span class="value">{sum("succeeded")}</span>
        </Link>
        <Link class="card" to="/tasks?state=FAILURE">
          <span class="label">Failed</span>
          <span class="value">{sum("failed")}</span>
        </Link>
      </div>
      <div class="toolbar">
        <label>
          Search{" "}
          <input type="search" value={search} onInput={(e) => setQuery({ search: (e.target as HTMLInputElement).value })} />
        </label>
        {since !== null && (
          <span class="muted" data-counted-since>
            Failed, succeeded and retried count the task events since stamen started, {fmtTime(since)}.
          </span>
        )}
      </div>
      <div class="scroll">
        <table class="grid" aria-label="Workers">
          <thead>
            <tr>
              <th scope="col">Worker</th>
              <th scope="col">Status</th>
              <th scope="col" class="num">Active</th>
              <th scope="col" class="num">Processed</th>
              <th scope="col" class="num">Failed</th>
              <th scope="col" class="num">Succeeded</th>
              <th scope="col" class="num">Retried</th>
              <th scope="col">Load average</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.name} data-worker={r.name}>
                <td>
                  <Link to={"/worker/" + enc(r.name)}>{r.name}</Link>
                </td>
                <td>
                  <span class={r.alive ? "badge s-success" : "badge s-offline"} data-status>
                    {r.alive ? "Online" : "Offline"}
                  </span>
                </td>
                <td class="num">{r.active ?? ""}</td>
                <td class="num">{r.processed ?? ""}</td>
                <td class="num" data-count="failed">{r.failed ?? ""}</td>
                <td class="num" data-count="succeeded">{r.succeeded ?? ""}</td>
                <td class="num" data-count="retried">{r.retried ?? ""}</td>
                <td>{r.loadavg ? r.loadavg.map((x) => Number(x).toFixed(2)).join(", ") : ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {!rows.length && !error && <p class="muted">No worker has been seen yet.</p>}
      </div>
      <Charts filter={{}} />
    </section>
  );
}
