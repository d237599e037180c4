// Reading GET /api/events's text/event-stream, shared by the page's own
// stream and the stream a SharedWorker holds for every tab.
export type CeleryEvent = { type: string; [k: string]: unknown };

// readSSE reads body until it ends: onEvent gets each event with its id
// ("<instance>:<n>"), onDropped runs when stamen says it dropped events
// for this reader (it read too slowly).
export async function readSSE(
  body: ReadableStream<Uint8Array>,
  onEvent: (ev: CeleryEvent, id: string) => void,
  onDropped: () => void,
): Promise<void> {
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
        else if (line.startsWith(": dropped ")) onDropped();
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
      onEvent(ev, id);
    }
  }
}

// openStream opens the stream, throwing an Error that says why when stamen
// answers otherwise than with one.
export async function openStream(url: string, headers: Record<string, string>, signal: AbortSignal): Promise<ReadableStream<Uint8Array>> {
  const r = await fetch(url, { headers: { Accept: "text/event-stream", ...headers }, signal, cache: "no-store" });
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
  return r.body;
}
