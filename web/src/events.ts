// The live event stream, GET /api/events, read with fetch rather than
// EventSource so that the bearer token goes in the Authorization header.
// When the stream drops the page says so, reconnects, and tells every
// listener to catch up (refetch what it shows).
import { signal } from "@preact/signals";
import { authHeaders, baseUrl } from "./api";

export type CeleryEvent = { type: string; [k: string]: unknown };
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

let started = false;
let abort: AbortController | null = null;
// hidden: the page is being left (or frozen in the back/forward cache).
// The stream is closed then: an open one would hold one of the browser's
// six HTTP/1.1 connections to stamen, and a few of them stall every other
// request.
let hidden = false;
let wake: (() => void) | null = null;

window.addEventListener("pagehide", () => {
  hidden = true;
  abort?.abort();
});
window.addEventListener("pageshow", () => {
  hidden = false;
  wake?.();
});

export function startEvents() {
  if (started) return;
  started = true;
  void loop();
}

export function restartEvents() {
  abort?.abort();
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
      const r = await fetch(baseUrl + "/api/events?type=task-*,worker-*", {
        headers: { Accept: "text/event-stream", ...authHeaders() },
        signal: abort.signal,
        cache: "no-store",
      });
      if (!r.ok || !r.body) {
        let msg = `${r.status} ${r.statusText}`;
        try {
          const j = await r.json();
          if (typeof j?.error === "string") msg = `${r.status}: ${j.error}`;
        } catch {
          /* not JSON */
        }
        throw new Error(msg);
      }
      connected.value = "live";
      streamError.value = "";
      delay = 500;
      if (dropped) resyncs.forEach((f) => f());
      dropped = false;
      await read(r.body);
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

async function read(body: ReadableStream<Uint8Array>) {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let type = "message";
      let id = "";
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) type = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        else if (line.startsWith("id:")) id = line.slice(3).trim();
        // This tab read too slowly and stamen dropped events for it: what
        // the pages show is caught up as after a reconnection.
        else if (line.startsWith(": dropped ")) resyncs.forEach((f) => f());
      }
      if (!data.length) continue;
      let ev: CeleryEvent;
      try {
        ev = JSON.parse(data.join("\n"));
      } catch {
        continue;
      }
      if (typeof ev !== "object" || ev === null) continue;
      ev.type = type;
      listeners.forEach((l) => {
        try {
          l(ev, id);
        } catch (e) {
          console.error(e);
        }
      });
    }
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
