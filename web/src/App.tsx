import { useEffect, useState } from "preact/hooks";
import { setToken, token, unauthorized } from "./api";
import { connected, restartEvents, startEvents, streamError } from "./events";
import { loadSession, needsSignIn, session, sessionError } from "./state";
import { navigate, onLink, route } from "./router";
import { Link } from "./ui";
import { Workers } from "./pages/Workers";
import { Worker } from "./pages/Worker";
import { Tasks } from "./pages/Tasks";
import { Task } from "./pages/Task";
import { Queues } from "./pages/Queues";
import { Settings } from "./pages/Settings";
import { Failures } from "./pages/Failures";
import { Audit } from "./pages/Audit";

function Page() {
  const p = route.value.path;
  let m;
  if (p === "/" || p === "/workers") return <Workers />;
  if ((m = p.match(/^\/worker\/(.+)$/))) return <Worker key={m[1]} name={decodeURIComponent(m[1])} />;
  if (p === "/tasks") return <Tasks />;
  if ((m = p.match(/^\/task\/(.+)$/))) return <Task key={m[1]} id={decodeURIComponent(m[1])} />;
  if (p === "/queues") return <Queues />;
  if (p === "/settings") return <Settings />;
  if (p === "/failures") return <Failures />;
  if (p === "/audit") return <Audit />;
  return (
    <section>
      <h1>Not found</h1>
      <p>
        This page does not exist. <Link to="/">Workers</Link>
      </p>
    </section>
  );
}

function NavLink({ to, label }: { to: string; label: string }) {
  const p = route.value.path;
  const here = to === "/" ? p === "/" || p.startsWith("/worker") : p.startsWith(to.replace(/s$/, ""));
  return (
    <Link to={to}>
      <span aria-current={here ? "page" : undefined}>{label}</span>
    </Link>
  );
}

function SignIn() {
  const [t, setT] = useState("");
  return (
    <section class="signin">
      <h1>Sign in</h1>
      <p>stamen needs credentials. With a user name and password, reload the page and answer the browser's prompt. With a token:</p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          setToken(t.trim());
          restartEvents();
          void loadSession();
        }}
      >
        <label>
          Bearer token{" "}
          <input type="password" name="token" autoComplete="off" required value={t} onInput={(e) => setT((e.target as HTMLInputElement).value)} />
        </label>
        <button type="submit" class="primary">
          Sign in
        </button>
      </form>
      {token() && <p class="error" role="alert">That token was not accepted.</p>}
    </section>
  );
}

export function App() {
  useEffect(() => {
    void loadSession();
    const f = () => void loadSession();
    unauthorized.add(f);
    return () => unauthorized.delete(f);
  }, []);
  useEffect(() => {
    if (session.value) startEvents();
  }, [session.value]);
  const s = session.value;
  return (
    <div onClick={(e) => onLink(e as unknown as MouseEvent)}>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header>
        <nav aria-label="Main">
          <Link to="/" class="brand">
            stamen
          </Link>
          <NavLink to="/" label="Workers" />
          <NavLink to="/tasks" label="Tasks" />
          <NavLink to="/failures" label="Failures" />
          <NavLink to="/queues" label="Queues" />
          {s?.role === "operator" && <NavLink to="/audit" label="Audit" />}
          <NavLink to="/settings" label="Settings" />
        </nav>
        <div class="who">
          {s && (
            <span data-session>
              {s.user} · {s.role}
              {s.read_only ? " · read-only" : ""}
            </span>
          )}
          {s && s.auth === "bearer" && (
            <button
              type="button"
              class="small"
              onClick={() => {
                setToken(null);
                session.value = null;
                needsSignIn.value = true;
                restartEvents();
                navigate("/");
              }}
            >
              Sign out
            </button>
          )}
          {s && signedInBySession(s.auth) && (
            <a class="small" href="logout" data-signout>
              Sign out
            </a>
          )}
          {s && (
            <span class={"live " + connected.value} title={streamError.value}>
              {connected.value === "live" ? "Live" : connected.value === "down" ? "Offline" : "Connecting"}
            </span>
          )}
        </div>
      </header>
      {s && connected.value === "down" && (
        <div class="banner" role="alert">
          The live event stream dropped ({streamError.value}). Reconnecting; the page catches up when it is back.
        </div>
      )}
      <main id="main">
        {needsSignIn.value ? <SignIn /> : sessionError.value && !s ? <div class="error" role="alert">{sessionError.value}</div> : s ? <Page /> : <p class="muted">Loading…</p>}
      </main>
    </div>
  );
}

// signedInBySession tells whether the caller signed in through stamen's
// sign-in (a provider's session cookie or a trusted proxy's header), whose
// sign-out is the server's logout page: the other methods are a browser's
// basic-auth prompt, a token this tab holds, a client certificate, or none.
function signedInBySession(method: string): boolean {
  return !["none", "basic", "bearer", "cert"].includes(method);
}
