// A task's canvas: the tasks related to it by the parent and root ids
// the events carry (a chain's links, a group's members under their
// parent), drawn as a tree of links from the root, each coloured by its
// state. HTML and CSS only: every name in it is text.
import { useEffect, useState } from "preact/hooks";
import { api, ok, type Task } from "./api";
import { onEvent, throttle } from "./events";
import { enc } from "./router";
import { Link } from "./ui";

// At most this many tasks are fetched for one graph.
const maxNodes = 64;

type Node = { id: string; task: Task | null; kids: string[] };

async function info(id: string): Promise<Task | null> {
  try {
    return await ok(api.GET("/api/task/info/{taskid}", { params: { path: { taskid: id } } }));
  } catch {
    return null;
  }
}

// walk fetches the tree from root, breadth first, within maxNodes.
async function walk(root: string): Promise<Map<string, Node>> {
  const nodes = new Map<string, Node>();
  let level = [root];
  while (level.length && nodes.size < maxNodes) {
    level = level.filter((id) => !nodes.has(id)).slice(0, maxNodes - nodes.size);
    const got = await Promise.all(level.map(info));
    const next: string[] = [];
    level.forEach((id, i) => {
      const kids = (got[i]?.children ?? []).filter((k) => typeof k === "string");
      nodes.set(id, { id, task: got[i], kids });
      next.push(...kids);
    });
    level = next;
  }
  return nodes;
}

export function Graph({ task }: { task: Task }) {
  const root = task.root_id || task.parent_id || task.uuid;
  const [nodes, setNodes] = useState<Map<string, Node> | null>(null);
  useEffect(() => {
    let gone = false;
    let known = new Set<string>();
    const load = async () => {
      const n = await walk(root);
      if (gone) return;
      known = new Set(n.keys());
      setNodes(n);
    };
    void load();
    const again = throttle(() => void load(), 1000);
    const off = onEvent((ev) => {
      const id = typeof ev.uuid === "string" ? ev.uuid : "";
      if (known.has(id) || ev.root_id === root || (typeof ev.parent_id === "string" && known.has(ev.parent_id))) again();
    });
    return () => {
      gone = true;
      off();
    };
  }, [root]);
  if (!nodes || nodes.size < 2) return null;
  const seen = new Set<string>();
  const draw = (id: string) => {
    const n = nodes.get(id);
    if (!n || seen.has(id)) return null;
    seen.add(id);
    const st = n.task?.state ?? "";
    return (
      <li key={id}>
        <Link to={"/task/" + enc(id)} class={"node s-" + st.toLowerCase().replace(/[^a-z]/g, "")} title={id}>
          <span data-node={id} data-state={st} aria-current={id === task.uuid ? "page" : undefined}>
            {n.task?.name ?? "unknown task"} · {st || "?"} · {id.slice(0, 8)}
          </span>
        </Link>
        {!!n.kids.length && <ul>{n.kids.map(draw)}</ul>}
      </li>
    );
  };
  return (
    <section class="block graph" aria-label="Related tasks" data-graph>
      <h2>Canvas</h2>
      <p class="muted">The tasks linked by parent and root ids, from the root{nodes.size >= maxNodes ? ` (the first ${maxNodes})` : ""}.</p>
      <ul class="tree">{draw(root)}</ul>
    </section>
  );
}
