import { useEffect, useState } from "preact/hooks";
import { api, ok, type WorkerInfo } from "../api";
import { onEvent, onResync, throttle } from "../events";
import { canWrite } from "../state";
import { enc } from "../router";
import { Answer, Confirm, ErrorBox, Link, useAction, useTitle } from "../ui";

// kombu's separator between a Redis queue and its priority step.
const SEP = "\x06\x16";

export function Queues() {
  useTitle("Queues");
  const [queues, setQueues] = useState<{ name: string; messages: number }[]>([]);
  const [consumers, setConsumers] = useState<Record<string, string[]>>({});
  const [error, setError] = useState<unknown>(null);
  const [outcome, busy, run] = useAction();
  const load = async () => {
    try {
      const [q, w] = await Promise.all([ok(api.GET("/api/queues/length")), ok(api.GET("/api/workers"))]);
      setQueues(q.active_queues);
      const c: Record<string, string[]> = {};
      for (const [name, info] of Object.entries(w as Record<string, WorkerInfo>)) {
        for (const aq of (info.active_queues ?? []) as any[]) {
          const n = String(aq?.name ?? "");
          (c[n] ??= []).push(name);
        }
      }
      setConsumers(c);
      setError(null);
    } catch (e) {
      setError(e);
    }
  };
  useEffect(() => {
    void load();
    // Lengths change as tasks are sent and taken: follow the task events,
    // at most once a second.
    const again = throttle(() => void load(), 1000);
    const off = onEvent((ev) => {
      if (ev.type === "task-sent" || ev.type === "task-received" || ev.type === "worker-online" || ev.type === "worker-offline") again();
    });
    const offRe = onResync(() => void load());
    return () => {
      off();
      offRe();
    };
  }, []);
  const write = canWrite.value;
  // Priority sub-queues get a column only when the API lists some.
  const prio = queues.some((q) => q.name.includes(SEP));
  return (
    <section>
      <h1>Queues</h1>
      <div class="toolbar">
        <button type="button" onClick={() => void load()}>
          Refresh
        </button>
      </div>
      <ErrorBox error={error} />
      <Answer outcome={outcome} />
      <div class="scroll">
        <table class="grid" aria-label="Queues">
          <thead>
            <tr>
              <th scope="col">Queue</th>
              {prio && <th scope="col">Priority</th>}
              <th scope="col" class="num">Messages</th>
              <th scope="col">Consumers</th>
              {write && <th scope="col">Purge</th>}
            </tr>
          </thead>
          <tbody>
            {queues.map((q) => {
              const [base, step] = q.name.split(SEP);
              return (
                <tr key={q.name} data-queue={q.name}>
                  <td>{base}</td>
                  {prio && <td>{step ?? ""}</td>}
                  <td class="num" data-messages>{q.messages}</td>
                  <td>
                    {(consumers[base] ?? []).map((w) => (
                      <div key={w}><Link to={"/worker/" + enc(w)}>{w}</Link></div>
                    ))}
                  </td>
                  {write && (
                    <td>
                      {step === undefined && (
                        <Confirm
                          name="purge"
                          danger
                          label="Purge"
                          disabled={busy}
                          question={<>Delete the {q.messages} message{q.messages === 1 ? "" : "s"} waiting in queue <b>{base}</b>?</>}
                          onConfirm={() =>
                            run(async () => {
                              const r = await ok(api.POST("/api/queues/purge/{queue}", { params: { path: { queue: base } } }));
                              return { message: `Purged ${r.purged} message${r.purged === 1 ? "" : "s"} from ${r.queue}` };
                            }, load)
                          }
                        />
                      )}
                    </td>
                  )}
                </tr>
              );
            })}
          </tbody>
        </table>
        {!queues.length && !error && <p class="muted">No queue is consumed.</p>}
      </div>
    </section>
  );
}
