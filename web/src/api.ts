// The typed API client: its types are generated from swagger.yaml
// (make generate), so a call the spec does not have, or a field it does
// not give, fails the build.
import createClient, { type Middleware } from "openapi-fetch";
import type { components, paths } from "./api/schema";

export type Task = components["schemas"]["Task"];
export type Session = components["schemas"]["Session"];
export type WorkerInfo = components["schemas"]["WorkerInfo"];

// The app's root as the browser sees it: the server sets <base href> to it,
// whatever prefix or proxy path stamen is served under.
export const root = new URL(".", document.baseURI);
export const baseUrl = root.href.replace(/\/$/, "");

const tokenKey = "stamen.token";

// The bearer token lives in the tab's sessionStorage only: never in a URL,
// a cookie or localStorage.
export function token(): string | null {
  try {
    return sessionStorage.getItem(tokenKey);
  } catch {
    return null;
  }
}

export function setToken(t: string | null) {
  if (t) sessionStorage.setItem(tokenKey, t);
  else sessionStorage.removeItem(tokenKey);
}

export function authHeaders(): Record<string, string> {
  const t = token();
  return t ? { Authorization: "Bearer " + t } : {};
}

const auth: Middleware = {
  onRequest({ request }) {
    const t = token();
    if (t) request.headers.set("Authorization", "Bearer " + t);
    return request;
  },
};

export const api = createClient<paths>({ baseUrl });
api.use(auth);

// ApiError is an API answer other than 2xx, with its {"error": "..."}
// message.
export class ApiError extends Error {
  constructor(
    public status: number,
    message: string,
  ) {
    super(message);
  }
}

const statusText: Record<number, string> = {
  401: "Sign in needed",
  403: "Not allowed",
  404: "Not found",
  409: "Conflict",
  422: "Result unreadable",
  502: "The broker refused",
  503: "Unavailable",
  504: "Timed out",
};

export function describe(e: unknown): string {
  if (e instanceof ApiError) {
    const what = statusText[e.status] ?? "Error";
    return `${what} (${e.status}): ${e.message}`;
  }
  if (e instanceof Error) return e.message;
  return String(e);
}

// ok unwraps an openapi-fetch answer, throwing an ApiError for an error
// status.
export async function ok<T>(
  p: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  let r;
  try {
    r = await p;
  } catch (e) {
    throw new ApiError(0, "stamen cannot be reached: " + describe(e));
  }
  if (!r.response.ok) {
    const err = r.error as { error?: unknown } | string | undefined;
    let msg = r.response.statusText;
    if (err && typeof err === "object" && typeof err.error === "string") msg = err.error;
    else if (typeof err === "string" && err) msg = err;
    if (r.response.status === 401) unauthorized.forEach((f) => f());
    throw new ApiError(r.response.status, msg);
  }
  return r.data as T;
}

export const unauthorized = new Set<() => void>();
