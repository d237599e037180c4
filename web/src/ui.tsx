import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { describe } from "./api";
import { href } from "./router";

export function Link(props: { to: string; children: ComponentChildren; class?: string; title?: string }) {
  return (
    <a href={href(props.to)} class={props.class} title={props.title}>
      {props.children}
    </a>
  );
}

// ErrorBox shows an API error in place, readably.
export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <div class="error" role="alert">
      {describe(error)}
    </div>
  );
}

// Answer shows what the worker or the API answered to a control.
export type Outcome = { ok: boolean; text: string } | null;
export function Answer({ outcome }: { outcome: Outcome }) {
  if (!outcome) return null;
  return (
    <div class={outcome.ok ? "answer ok" : "error"} role="status" data-answer>
      {outcome.text}
    </div>
  );
}

// useAction runs a control's call and keeps its outcome for Answer.
export function useAction(): [Outcome, boolean, (f: () => Promise<unknown>, after?: () => void) => Promise<void>] {
  const [outcome, setOutcome] = useState<Outcome>(null);
  const [busy, setBusy] = useState(false);
  const run = async (f: () => Promise<unknown>, after?: () => void) => {
    setBusy(true);
    setOutcome(null);
    try {
      const r: any = await f();
      const text =
        r && typeof r === "object"
          ? typeof r.message === "string"
            ? r.message
            : JSON.stringify(r)
          : String(r ?? "done");
      setOutcome({ ok: true, text });
      after?.();
    } catch (e) {
      setOutcome({ ok: false, text: describe(e) });
    } finally {
      setBusy(false);
    }
  };
  return [outcome, busy, run];
}

// Confirm is a button that asks first, in a modal <dialog>.
export function Confirm(props: {
  label: string;
  question: ComponentChildren;
  onConfirm: () => void;
  danger?: boolean;
  disabled?: boolean;
  name?: string;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  return (
    <>
      <button
        type="button"
        class={props.danger ? "danger" : ""}
        disabled={props.disabled}
        data-action={props.name}
        onClick={() => ref.current?.showModal()}
      >
        {props.label}
      </button>
      <dialog ref={ref} aria-label={props.label}>
        <form method="dialog">
          <p>{props.question}</p>
          <div class="row">
            <button value="cancel" type="submit">
              Cancel
            </button>
            <button
              value="ok"
              type="submit"
              class={props.danger ? "danger" : "primary"}
              data-confirm={props.name}
              onClick={() => props.onConfirm()}
            >
              {props.label}
            </button>
          </div>
        </form>
      </dialog>
    </>
  );
}

export function Copy({ text, label }: { text: string; label: string }) {
  const [done, setDone] = useState(false);
  useEffect(() => {
    if (!done) return;
    const t = setTimeout(() => setDone(false), 1500);
    return () => clearTimeout(t);
  }, [done]);
  return (
    <button
      type="button"
      class="small"
      aria-label={label}
      onClick={async () => {
        try {
          await navigator.clipboard.writeText(text);
          setDone(true);
        } catch {
          /* clipboard refused */
        }
      }}
    >
      {done ? "Copied" : "Copy"}
    </button>
  );
}

// KV shows an object's keys and values as text.
export function KV({ obj, label }: { obj: Record<string, unknown> | undefined | null; label: string }) {
  if (!obj || !Object.keys(obj).length) return <p class="muted">Nothing to show.</p>;
  return (
    <table class="kv" aria-label={label}>
      <tbody>
        {Object.entries(obj)
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([k, v]) => (
            <tr key={k}>
              <th scope="row">{k}</th>
              <td>
                <code>{typeof v === "string" ? v : JSON.stringify(v)}</code>
              </td>
            </tr>
          ))}
      </tbody>
    </table>
  );
}

export function StateBadge({ state }: { state: string | null | undefined }) {
  const s = state ?? "";
  return <span class={"badge s-" + s.toLowerCase().replace(/[^a-z]/g, "")}>{s}</span>;
}

// useTitle names the page for the tab and for screen readers.
export function useTitle(t: string) {
  useEffect(() => {
    document.title = t + " · stamen";
  }, [t]);
}
