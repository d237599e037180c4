import { theme, timeStyle, timeZone } from "../state";
import { useTitle } from "../ui";

function Choice<T extends string>(props: { legend: string; value: T; set: (v: T) => void; options: [T, string][] }) {
  return (
    <fieldset>
      <legend>{props.legend}</legend>
      {props.options.map(([v, label]) => (
        <label key={v}>
          <input type="radio" name={props.legend} value={v} checked={props.value === v} onChange={() => props.set(v)} /> {label}
        </label>
      ))}
    </fieldset>
  );
}

export function Settings() {
  useTitle("Settings");
  return (
    <section>
      <h1>Settings</h1>
      <p class="muted">Kept in this browser.</p>
      <Choice legend="Theme" value={theme.value} set={(v) => (theme.value = v)}
        options={[["system", "System"], ["light", "Light"], ["dark", "Dark"]]} />
      <Choice legend="Time zone" value={timeZone.value} set={(v) => (timeZone.value = v)}
        options={[["local", "This browser's"], ["utc", "UTC"]]} />
      <Choice legend="Times" value={timeStyle.value} set={(v) => (timeStyle.value = v)}
        options={[["absolute", "Absolute (2026-01-02 15:04:05)"], ["relative", "Relative (3 min ago)"]]} />
    </section>
  );
}
