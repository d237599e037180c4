// The live event stream, GET /api/events, read with fetch rather than
// EventSource so that the bearer token goes in the Authorization header.
// When the stream drops the page says so, reconnects, and tells every
// listener to catch up (refetch what it shows).
//
// The tabs of one browser share one stream where the browser has
// SharedWorker (events-worker.ts): over HTTP/1.1 a browser opens at most
// six connections to a host, and a stream per tab would take them all.
// Elsewhere each tab reads its own.
import { signal } from "@preact/signals";
import { authHeaders, baseUrl, token } from "./api";
import { openStream, readSSE, type CeleryEvent } from "./sse";
import EventsWorker from "./events-worker?sharedworker";

export type { CeleryEvent };
// A listener gets the event and its SSE id, "<instance>:<n>": n numbers
// the events that stamen process applied (GET /api/stats/workers says up
// to which n its counts go).
type Listener = (ev: CeleryEvent, id: string) => void;

export const connected = signal<"connecting" | "live" | "down">("connecting");
export const streamError = signal<string>("");

const listeners = new Set<Listener>();
const resyncs = new Set<() => void>();

export function onEvent(l: Listener): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}

// onResync runs f after the stream came back from a drop.
export function onResync(f: () => void): () => void {
  resyncs.add(f);
  return () => resyncs.delete(f);
}

function dispatch(ev: CeleryEvent, id: string) {
  listeners.forEach((l) => {
    try {
      l(ev, id);
    } catch (e) {
      console.error(e);
    }
  });
}

function resync() {
  resyncs.forEach((f) => f());
}

const streamURL = () => baseUrl + "/api/events?type=task-*,worker-*";

let started = false;
let abort: AbortController | null = null;
// hidden: the page is being left (or frozen in the back/forward cache).
// Its stream is closed then (or it leaves the shared one): an open one
// would hold one of the browser's six HTTP/1.1 connections to stamen, and
// a few of them stall every other request.
let hidden = false;
let wake: (() => void) | null = null;
// shared: this tab reads the shared stream; false where SharedWorker is
// missing, or once the worker could not start (its script did not load:
// stamen was unreachable then), and the tab reads a stream of its own.
let shared = typeof SharedWorker === "function";
let port: MessagePort | null = null;
let looping = false;

window.addEventListener("pagehide", () => {
  hidden = true;
  if (shared) leave();
  else abort?.abort();
});
window.addEventListener("pageshow", () => {
  if (!hidden) return;
  hidden = false;
  if (shared && started) {
    join();
    resync(); // what came while the page was away
  }
  wake?.();
});

export function startEvents() {
  if (started) return;
  started = true;
  if (shared) join();
  else ownStream();
}

function ownStream() {
  shared = false;
  port = null;
  if (looping) return;
  looping = true;
  void loop();
}

export function restartEvents() {
  if (!shared) {
    abort?.abort();
    return;
  }
  if (!started) return;
  // The credentials may have changed: the stream of the new ones.
  leave();
  connected.value = "connecting";
  join();
}

// fnv1a names the shared stream after the tab's token without putting the
// token itself in the name.
function fnv1a(s: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16);
}

function join() {
  let w: SharedWorker;
  try {
    w = new EventsWorker({ name: "stamen-events " + fnv1a(token() ?? "") });
  } catch (e) {
    // A browser may refuse workers (a policy, a private mode): a stream of
    // this tab's own.
    console.error(e);
    ownStream();
    return;
  }
  const p = w.port;
  port = p;
  w.onerror = () => {
    if (port !== p) return;
    ownStream();
    resync(); // what came while the worker failed
  };
  p.onmessage = (m: MessageEvent) => {
    if (port !== p) return;
    const d = m.data as { kind: string; connected?: "connecting" | "live" | "down"; error?: string; ev?: CeleryEvent; id?: string };
    if (d.kind === "event" && d.ev) dispatch(d.ev, d.id ?? "");
    else if (d.kind === "status" && d.connected) {
      connected.value = d.connected;
      streamError.value = d.error ?? "";
    } else if (d.kind === "resync") resync(); // the shared stream came back, or lost events
  };
  p.start();
  p.postMessage({ kind: "start", url: streamURL(), headers: authHeaders() });
}

function leave() {
  if (!port) return;
  port.postMessage({ kind: "bye" });
  port.close();
  port = null;
}

async function loop() {
  let delay = 500;
  let dropped = false;
  for (;;) {
    if (hidden) {
      await new Promise<void>((res) => (wake = res));
      wake = null;
      dropped = true;
    }
    abort = new AbortController();
    try {
      const body = await openStream(streamURL(), authHeaders(), abort.signal);
      connected.value = "live";
      streamError.value = "";
      delay = 500;
      if (dropped) resync();
      dropped = false;
      // A tab that read too slowly lost events: it catches up as after a
      // reconnection.
      await readSSE(body, dispatch, resync);
      throw new Error("the event stream ended");
    } catch (e: any) {
      if (hidden) continue;
      connected.value = "down";
      streamError.value = e?.name === "AbortError" ? "reconnecting" : String(e?.message ?? e);
      dropped = true;
    }
    await new Promise((res) => setTimeout(res, delay));
    delay = Math.min(delay * 2, 10000);
  }
}

// throttle runs f at most once per ms, trailing edge included.
export function throttle(f: () => void, ms: number): () => void {
  let timer: ReturnType<typeof setTimeout> | null = null;
  let pending = false;
  return () => {
    if (timer) {
      pending = true;
      return;
    }
    f();
    timer = setTimeout(function tick() {
      if (pending) {
        pending = false;
        f();
        timer = setTimeout(tick, ms);
      } else timer = null;
    }, ms);
  };
}
