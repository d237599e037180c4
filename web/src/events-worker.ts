// The event stream every tab of one browser shares: a SharedWorker holds one
// GET /api/events and hands each event to the tabs connected to it. Over
// HTTP/1.1 a browser opens at most six connections to a host, and a stream
// per tab held one each: a seventh tab waited for ever, and the other
// requests of all tabs waited behind the streams.
//
// A tab sends {kind: "start", url, headers} when it connects and
// {kind: "bye"} when it leaves (the stream closes when the last one has); it gets {kind: "status", connected, error},
// {kind: "event", ev, id} and {kind: "resync"} (events were lost: refetch).
// The worker is named after the tab's credentials, so tabs signed in with
// different tokens do not share a stream.
import { openStream, readSSE } from "./sse";

type Status = { connected: "connecting" | "live" | "down"; error: string };

// The DOM's types, not the WebWorker library's (one program cannot have
// both): what this script uses of SharedWorkerGlobalScope.
const scope = self as unknown as { onconnect: ((e: MessageEvent) => void) | null };

const ports = new Set<MessagePort>();
let status: Status = { connected: "connecting", error: "" };
let url = "";
let headers: Record<string, string> = {};
let abort: AbortController | null = null;
let running = false;
let stopped = false;
let stopTimer: ReturnType<typeof setTimeout> | undefined;
// How long the stream stays open after the last tab left.
const leaveGrace = 3000;

function post(m: unknown) {
  for (const p of ports) p.postMessage(m);
}

function setStatus(s: Status) {
  status = s;
  post({ kind: "status", ...s });
}

scope.onconnect = (e: MessageEvent) => {
  const port = e.ports[0];
  port.onmessage = (m: MessageEvent) => {
    const d = m.data as { kind: string; url?: string; headers?: Record<string, string> };
    if (d.kind === "start" && typeof d.url === "string") {
      url = d.url;
      headers = d.headers ?? {};
      ports.add(port);
      port.postMessage({ kind: "status", ...status });
      clearTimeout(stopTimer);
      stopped = false;
      if (!running) {
        running = true;
        void loop().finally(() => (running = false));
      }
    } else if (d.kind === "bye") {
      ports.delete(port);
      port.close();
      if (!ports.size) {
        // The last tab left: nobody needs the connection, unless the tab
        // is only going to another page of the dashboard, whose page
        // joins within moments and goes on with the stream as it is.
        // The worker itself stays until the browser ends it (once no
        // page holds it): closing it here raced a page of the same tab
        // that was connecting to it already, which got a dead port.
        clearTimeout(stopTimer);
        stopTimer = setTimeout(() => {
          if (ports.size) return;
          stopped = true;
          abort?.abort();
          status = { connected: "connecting", error: "" };
        }, leaveGrace);
      }
    }
  };
  port.start();
};

async function loop() {
  let delay = 500;
  let dropped = false;
  while (!stopped) {
    abort = new AbortController();
    try {
      const body = await openStream(url, headers, abort.signal);
      setStatus({ connected: "live", error: "" });
      delay = 500;
      if (dropped) post({ kind: "resync" });
      dropped = false;
      await readSSE(
        body,
        (ev, id) => post({ kind: "event", ev, id }),
        () => post({ kind: "resync" }),
      );
      throw new Error("the event stream ended");
    } catch (e: any) {
      if (stopped) return;
      setStatus({ connected: "down", error: e?.name === "AbortError" ? "reconnecting" : String(e?.message ?? e) });
      dropped = true;
    }
    await new Promise((res) => setTimeout(res, delay));
    delay = Math.min(delay * 2, 10000);
  }
}
