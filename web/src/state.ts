import { signal, computed, effect } from "@preact/signals";
import { api, ok, type Session } from "./api";

export const session = signal<Session | null>(null);
export const sessionError = signal<string | null>(null);
export const needsSignIn = signal(false);

// canWrite: the caller may use controls. A viewer would get 403, and
// --read_only refuses every write.
export const canWrite = computed(() => {
  const s = session.value;
  return !!s && s.role === "operator" && !s.read_only;
});

export async function loadSession() {
  try {
    session.value = await ok(api.GET("/api/session"));
    needsSignIn.value = false;
    sessionError.value = null;
  } catch (e: any) {
    session.value = null;
    if (e?.status === 401) needsSignIn.value = true;
    else sessionError.value = String(e?.message ?? e);
  }
}

// Settings kept in the browser (localStorage): no secret among them.
type Theme = "system" | "light" | "dark";
function stored<T extends string>(key: string, def: T, allowed: readonly T[]) {
  let v = def;
  try {
    const s = localStorage.getItem(key) as T | null;
    if (s && allowed.includes(s)) v = s;
  } catch {
    /* storage disabled */
  }
  const sig = signal<T>(v);
  effect(() => {
    try {
      localStorage.setItem(key, sig.value);
    } catch {
      /* storage disabled */
    }
  });
  return sig;
}
export const theme = stored<Theme>("stamen.theme", "system", ["system", "light", "dark"]);
export const timeZone = stored<"local" | "utc">("stamen.tz", "local", ["local", "utc"]);
export const timeStyle = stored<"absolute" | "relative">("stamen.timestyle", "absolute", ["absolute", "relative"]);

effect(() => {
  document.documentElement.dataset.theme = theme.value;
});

// now ticks every 10 s so that relative times age.
export const now = signal(Date.now());
setInterval(() => (now.value = Date.now()), 10000);

export function fmtTime(epoch: number | null | undefined): string {
  if (epoch == null) return "";
  const d = new Date(epoch * 1000);
  if (timeStyle.value === "relative") {
    const s = Math.round((now.value - d.getTime()) / 1000);
    const a = Math.abs(s);
    const v =
      a < 60 ? `${a} s` : a < 3600 ? `${Math.round(a / 60)} min` : a < 86400 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} d`;
    return s >= 0 ? `${v} ago` : `in ${v}`;
  }
  const utc = timeZone.value === "utc";
  const p = (n: number, w = 2) => String(n).padStart(w, "0");
  const [Y, M, D, h, m, s, ms] = utc
    ? [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds()]
    : [d.getFullYear(), d.getMonth() + 1, d.getDate(), d.getHours(), d.getMinutes(), d.getSeconds(), d.getMilliseconds()];
  return `${Y}-${p(M)}-${p(D)} ${p(h)}:${p(m)}:${p(s)}.${p(ms, 3)}${utc ? " UTC" : ""}`;
}

export function fmtTitle(epoch: number | null | undefined): string {
  if (epoch == null) return "";
  return new Date(epoch * 1000).toISOString();
}
