// Task activity over time from GET /api/stats/tasks, drawn with uPlot
// (small, canvas). The figures are also a table under the charts, for
// screen readers and for reading them as text; each of its cells, and a
// click on a chart, opens the tasks of that bucket.
import { useEffect, useRef, useState } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { api, ok } from "./api";
import type { components } from "./api/schema";
import { onEvent, onResync, throttle } from "./events";
import { navigate } from "./router";
import { ErrorBox, Link } from "./ui";

type Bucket = components["schemas"]["TaskStatsBucket"];
type Filter = { taskname?: string; workername?: string };

const ranges = [
  { key: "1h", label: "1 h", window: 3600, step: 60 },
  { key: "24h", label: "24 h", window: 86400, step: 900 },
  { key: "7d", label: "7 d", window: 604800, step: 3600 },
] as const;

// The counted states, their colour (readable on the light and the dark
// theme) and the task state the tasks table filters by.
const series = [
  { key: "received", label: "Received", color: "#6b7280", state: "" },
  { key: "started", label: "Started", color: "#0ea5e9", state: "" },
  { key: "succeeded", label: "Succeeded", color: "#16a34a", state: "SUCCESS" },
  { key: "failed", label: "Failed", color: "#dc2626", state: "FAILURE" },
  { key: "retried", label: "Retried", color: "#d97706", state: "RETRY" },
  { key: "revoked", label: "Revoked", color: "#9333ea", state: "REVOKED" },
] as const;

// The tasks page's received-time window takes datetime-local values
// (YYYY-MM-DDTHH:MM, local time).
function local(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

function tasksLink(f: Filter, start: number, step: number, state: string): string {
  const q = new URLSearchParams();
  if (f.taskname) q.set("taskname", f.taskname);
  if (f.workername) q.set("workername", f.workername);
  if (state) q.set("state", state);
  q.set("from", local(start * 1000));
  q.set("to", local((start + step) * 1000));
  return "/tasks?" + q.toString();
}

function failureRate(b: Bucket): number | null {
  const done = b.succeeded + b.failed;
  return done ? (100 * b.failed) / done : null;
}

export function Charts({ filter }: { filter: Filter }) {
  const [range, setRange] = useState<(typeof ranges)[number]>(ranges[0]);
  const [data, setData] = useState<{ step: number; buckets: Bucket[] } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const { taskname, workername } = filter;

  useEffect(() => {
    let gone = false;
    const load = async () => {
      try {
        const r = await ok(
          api.GET("/api/stats/tasks", {
            params: { query: { window: range.window, step: range.step, ...(taskname ? { taskname } : {}), ...(workername ? { workername } : {}) } },
          }),
        );
        if (gone) return;
        setData({ step: r.step, buckets: r.buckets ?? [] });
        setError(null);
      } catch (e) {
        if (!gone) setError(e);
      }
    };
    void load();
    // Live: a task event refetches the window, at most every 3 s.
    const again = throttle(() => void load(), 3000);
    const off = onEvent((ev) => {
      if (ev.type.startsWith("task-")) again();
    });
    const offRe = onResync(() => void load());
    return () => {
      gone = true;
      off();
      offRe();
    };
  }, [range, taskname, workername]);

  const b = data?.buckets ?? [];
  const step = data?.step ?? range.step;
  const xs = b.map((x) => Date.parse(x.time) / 1000);
  const totals = Object.fromEntries(series.map((s) => [s.key, b.reduce((a, x) => a + x[s.key], 0)]));
  const open = (i: number, state: string) => navigate(tasksLink(filter, xs[i], step, state));

  return (
    <section class="charts" aria-label="Task activity" data-charts data-range={range.key} data-first={xs[0]} data-last={xs[xs.length - 1]}>
      <div class="toolbar">
        <h2>Activity</h2>
        <div class="chips" role="group" aria-label="Time range">
          {ranges.map((r) => (
            <button key={r.key} type="button" aria-pressed={r.key === range.key} data-range={r.key} onClick={() => setRange(r)}>
              {r.label}
            </button>
          ))}
        </div>
        <span class="muted" data-totals>
          {series.map((s) => `${s.label} ${totals[s.key]}`).join(" · ")}
        </span>
      </div>
      <ErrorBox error={error} />
      {data && (
        <div class="chart-row">
          <Plot
            title="Tasks per bucket"
            xs={xs}
            lines={series.map((s) => ({ label: s.label, color: s.color, values: b.map((x) => x[s.key]) }))}
            onPick={(i, k) => open(i, k >= 0 ? series[k].state : "")}
          />
          <Plot
            title="Failure rate (%) and runtime (s)"
            xs={xs}
            percent
            lines={[
              { label: "Failure rate %", color: "#dc2626", values: b.map(failureRate) },
              { label: "Runtime p50 s", color: "#2563eb", values: b.map((x) => x.runtime_p50 ?? null), axis: "s" },
              { label: "Runtime p95 s", color: "#7c3aed", values: b.map((x) => x.runtime_p95 ?? null), axis: "s" },
            ]}
            onPick={(i, k) => open(i, k === 0 ? "FAILURE" : "")}
          />
        </div>
      )}
      {data && (
        <details class="block">
          <summary>The figures as a table</summary>
          <div class="scroll">
            <table aria-label="Task activity figures" data-figures>
              <thead>
                <tr>
                  <th scope="col">Bucket start</th>
                  {series.map((s) => (
                    <th key={s.key} scope="col">{s.label}</th>
                  ))}
                  <th scope="col">Runtime p50 (s)</th>
                  <th scope="col">Runtime p95 (s)</th>
                </tr>
              </thead>
              <tbody>
                {b.map((x, i) =>
                  series.some((s) => x[s.key]) ? (
                    <tr key={x.time} data-bucket={x.time}>
                      <th scope="row">
                        <time>{new Date(x.time).toLocaleString()}</time>
                      </th>
                      {series.map((s) => (
                        <td key={s.key} data-count={s.key}>
                          {x[s.key] ? (
                            <Link to={tasksLink(filter, xs[i], step, s.state)}>{String(x[s.key])}</Link>
                          ) : (
                            "0"
                          )}
                        </td>
                      ))}
                      <td>{x.runtime_p50 ?? ""}</td>
                      <td>{x.runtime_p95 ?? ""}</td>
                    </tr>
                  ) : null,
                )}
              </tbody>
            </table>
          </div>
        </details>
      )}
    </section>
  );
}

type Line = { label: string; color: string; values: (number | null)[]; axis?: string };

// Plot is one uPlot chart. Hovering shows the figures in its legend; a
// click opens the tasks of the bucket under the cursor, in the state of
// the line nearest to it.
function Plot(props: { title: string; xs: number[]; lines: Line[]; percent?: boolean; onPick: (i: number, line: number) => void }) {
  const el = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const pick = useRef(props.onPick);
  pick.current = props.onPick;
  const shape = props.lines.map((l) => l.label).join("|");

  useEffect(() => {
    const host = el.current;
    if (!host) return;
    const fg = getComputedStyle(document.documentElement).getPropertyValue("--muted").trim() || "#4b5563";
    const grid = getComputedStyle(document.documentElement).getPropertyValue("--border").trim() || "#d1d5db";
    const axis = (scale: string, side = 3) => ({ scale, side, stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } });
    const width = () => Math.max(300, host.clientWidth || 600);
    const u = new uPlot(
      {
        title: props.title,
        width: width(),
        height: 220,
        cursor: { focus: { prox: 30 } },
        focus: { alpha: 0.4 },
        scales: { x: { time: true }, ...(props.percent ? { y: { range: [0, 100] as uPlot.Range.MinMax } } : {}) },
        axes: [{ stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } }, axis("y"), ...(props.lines.some((l) => l.axis) ? [axis("s", 1)] : [])],
        series: [
          {},
          ...props.lines.map((l) => ({ label: l.label, stroke: l.color, width: 2, scale: l.axis ?? "y", spanGaps: false, points: { show: true, size: 4 } })),
        ],
      },
      [props.xs, ...props.lines.map((l) => l.values)] as uPlot.AlignedData,
      host,
    );
    plot.current = u;
    u.over.addEventListener("click", (e) => {
      const i = u.posToIdx(e.offsetX);
      if (i == null || i < 0 || i >= u.data[0].length) return;
      const focused = u.series.findIndex((s, k) => k > 0 && (s as { _focus?: boolean })._focus);
      pick.current(i, focused > 0 ? focused - 1 : -1);
    });
    const ro = new ResizeObserver(() => u.setSize({ width: width(), height: 220 }));
    ro.observe(host);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
  }, [shape, props.title]);

  useEffect(() => {
    plot.current?.setData([props.xs, ...props.lines.map((l) => l.values)] as uPlot.AlignedData);
  }, [props.xs, props.lines]);

  return <div class="plot" ref={el} data-plot={props.title} />;
}
