// A small history router: the app's routes are paths below its root
// (document.baseURI), so they stay right under --url_prefix and behind a
// proxy. A framework router would need the base path at build time.
import { signal } from "@preact/signals";
import { root } from "./api";

function current() {
  const p = location.pathname;
  const base = root.pathname;
  const rel = p.startsWith(base) ? p.slice(base.length) : p.replace(/^\//, "");
  return { path: "/" + rel, query: new URLSearchParams(location.search) };
}

export const route = signal(current());

window.addEventListener("popstate", () => (route.value = current()));

// href is the URL of an app path ("/tasks?state=FAILURE").
export function href(path: string): string {
  return new URL(path.replace(/^\//, ""), root).pathname + (path.includes("?") ? "?" + path.split("?")[1] : "");
}

export function navigate(path: string, replace = false) {
  const url = href(path);
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  route.value = current();
  if (!replace) window.scrollTo(0, 0);
}

// setQuery replaces the query string of the current page (bookmarkable
// filters) without adding a history entry.
export function setQuery(q: Record<string, string | number | null | undefined>) {
  const u = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(q)) {
    if (v === null || v === undefined || v === "") u.delete(k);
    else u.set(k, String(v));
  }
  const s = u.toString();
  history.replaceState(null, "", location.pathname + (s ? "?" + s : ""));
  route.value = current();
}

// link handles a click on an in-app <a>: plain clicks navigate in the
// page, modified ones (new tab) are the browser's.
export function onLink(e: MouseEvent) {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = (e.target as Element).closest("a");
  if (!a || a.target || a.hasAttribute("download") || !a.href.startsWith(root.href)) return;
  e.preventDefault();
  navigate("/" + a.href.slice(root.href.length));
}

export const enc = encodeURIComponent;
