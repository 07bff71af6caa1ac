// The fleet dashboard. Every value from the API is user data (ids, topics, summaries):
// it reaches the page only as text (textContent, element attributes never built from
// markup), so nothing a user wrote can run here. The key lives in this script's memory
// (and in sessionStorage only when "keep it for this tab" is ticked), sent as a Bearer
// header, never in a URL.
"use strict";

(function () {
  const POLL_MS = 2000;
  const STORE = "acmi-dashboard-key";
  let readKey = null;
  let timer = null;
  let busy = false;

  const $ = (id) => document.getElementById(id);

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function row(cells) {
    const tr = document.createElement("tr");
    for (const cell of cells) {
      const td = document.createElement("td");
      if (cell instanceof Node) td.appendChild(cell);
      else td.textContent = cell === null || cell === undefined ? "" : String(cell);
      tr.appendChild(td);
    }
    return tr;
  }

  function fill(tableId, rows, empty) {
    const body = $(tableId).tBodies[0];
    body.replaceChildren();
    if (!rows.length) {
      const tr = row([empty]);
      tr.firstChild.colSpan = $(tableId).tHead.rows[0].cells.length;
      tr.className = "muted";
      body.appendChild(tr);
    }
    for (const r of rows) body.appendChild(r);
  }

  function ago(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 90) return s + " s ago";
    if (s < 5400) return Math.round(s / 60) + " min ago";
    if (s < 172800) return Math.round(s / 3600) + " h ago";
    return Math.round(s / 86400) + " d ago";
  }

  function within(ms) {
    const s = Math.round(ms / 1000);
    return s < 90 ? "in " + s + " s" : "in " + Math.round(s / 60) + " min";
  }

  function when(ts) {
    return typeof ts === "number" ? new Date(ts).toISOString().replace(/\.\d{3}Z$/, "Z") : "";
  }

  async function call(method, path, key, body) {
    const init = { method, headers: { Authorization: "Bearer " + key }, cache: "no-store" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) {
      const message = data && data.message ? data.message : "HTTP " + response.status;
      const error = new Error(message);
      error.status = response.status;
      throw error;
    }
    return data;
  }

  // HITL rows are kept across polls, keyed by correlationId: a resolution being typed
  // keeps its text and focus while the rest of the page refreshes.
  const hitlRows = new Map();

  function hitlRow(h) {
    const form = document.createElement("form");
    const text = el("input");
    text.type = "text";
    text.placeholder = "resolution";
    text.required = true;
    text.className = "resolution";
    const button = el("button", "Resolve");
    button.type = "submit";
    form.append(text, button);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      resolve(h.correlationId, text.value, button);
    });
    const tr = row(["", "", "", "", "", "", form]);
    tr.dataset.cid = h.correlationId || "";
    return tr;
  }

  function renderHitl(items) {
    const body = $("hitl").tBodies[0];
    const wanted = [];
    const seen = new Set();
    for (const h of items) {
      const cid = h.correlationId || "";
      seen.add(cid);
      let tr = hitlRows.get(cid);
      if (!tr) { tr = hitlRow(h); hitlRows.set(cid, tr); }
      const cells = tr.cells;
      cells[0].replaceChildren(el("span", h.urgency, "badge " + (h.urgency || "")));
      [h.topic, h.request, h.asked_by, h.queue, when(h.deadline)].forEach((value, i) => {
        cells[i + 1].textContent = value === null || value === undefined ? "" : String(value);
      });
      wanted.push(tr);
    }
    for (const [cid, tr] of hitlRows) if (!seen.has(cid)) { tr.remove(); hitlRows.delete(cid); }
    const current = Array.from(body.rows);
    const same = current.length === wanted.length && current.every((tr, i) => tr === wanted[i]);
    if (!same) body.replaceChildren(...wanted);  // moved only when the order changed
    if (!wanted.length) {
      const tr = row(["nothing waits for a human"]);
      tr.firstChild.colSpan = 7;
      tr.className = "muted";
      body.replaceChildren(tr);
    }
  }

  function render(view) {
    $("tenant").textContent = "tenant " + view.tenant;
    $("updated").textContent = "updated " + when(view.now);
    $("truncated").textContent = view.truncated.length
      ? "cut at the dashboard's caps: " + view.truncated.join(", ") : "";
    $("error").textContent = view.problems.length ? view.problems.join("; ") : "";

    fill("agents", view.agents.map((a) => {
      const state = el("span", a.stalled ? "STALLED" : (a.status || "unknown"),
        "badge " + (a.stalled ? "stalled" : "active"));
      const tr = row([a.agent, state, ago(a.age_ms), a.status_note]);
      tr.dataset.agent = a.agent;
      return tr;
    }), "no heartbeats yet");

    fill("locks", view.locks.map((l) => {
      const tr = row([l.resource, l.owner, l.fence, within(l.expires_in_ms) + " (" + when(l.expires_at) + ")"]);
      tr.dataset.resource = l.resource;
      return tr;
    }), "no lease held");

    renderHitl(view.hitl);

    fill("work", view.work.map((w) => {
      const tr = row([w.owner || "(unowned)", w.id, w.status || "(no status)"]);
      if (!w.open) tr.className = "closed";
      tr.dataset.work = w.id;
      return tr;
    }), "no work items");

    const steps = [];
    for (const wf of view.workflows) {
      const names = Object.keys(wf.steps);
      if (!names.length) steps.push(row([wf.workflow, "(no assessment)", 0, "", ""]));
      for (const name of names) {
        const s = wf.steps[name];
        steps.push(row([wf.workflow, name, s.count, s.mean, s.last]));
      }
    }
    fill("workflows", steps, "no workflows");

    const lessons = $("lessons");
    lessons.replaceChildren(...view.lessons.map((e) => {
      const p = e.payload && typeof e.payload === "object" ? e.payload : {};
      return el("li", [p.workflow, p.step, p.lesson || e.summary].filter(Boolean).join(" · "));
    }));

    const events = $("events");
    events.replaceChildren(...view.events.map((e) => {
      const li = el("li");
      li.append(el("span", when(e.ts) + " ", "muted"), el("strong", e.kind), el("span", " " + (e.source || "") + ": " + (e.summary || "")));
      return li;
    }));
  }

  async function refresh() {
    if (!readKey || busy) return;
    busy = true;
    try {
      render(await call("GET", "v1/dashboard", readKey));
    } catch (error) {
      if (error.status === 401 || error.status === 403) { logout(error.message); return; }
      $("error").textContent = "could not refresh: " + error.message;
    } finally {
      busy = false;
    }
  }

  async function resolve(cid, resolution, button) {
    const key = $("write-key").value;
    const message = $("hitl-message");
    if (!key) { message.textContent = "a write key is needed to resolve"; return; }
    button.disabled = true;
    try {
      await call("POST", "v1/hitl/" + encodeURIComponent(cid) + "/resolve", key,
        { resolution, by: $("resolver-id").value });
      message.textContent = "resolved " + cid;
      await refresh();
    } catch (error) {
      message.textContent = "could not resolve " + cid + ": " + error.message;
      button.disabled = false;
    }
  }

  function start(key) {
    readKey = key;
    $("login").hidden = true;
    $("board").hidden = false;
    $("logout").hidden = false;
    refresh();
    timer = setInterval(refresh, POLL_MS);
  }

  function logout(reason) {
    readKey = null;
    clearInterval(timer);
    sessionStorage.removeItem(STORE);
    $("write-key").value = "";
    // nothing of this key's tenant stays in the page for the next key to glimpse
    hitlRows.clear();
    for (const table of document.querySelectorAll("#board table")) table.tBodies[0].replaceChildren();
    for (const id of ["lessons", "events", "tenant", "updated", "error", "truncated", "hitl-message"]) {
      $(id).replaceChildren();
    }
    $("board").hidden = true;
    $("logout").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = reason || "";
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("login").addEventListener("submit", async (event) => {
      event.preventDefault();
      const key = $("key").value.trim();
      $("key").value = "";
      try {
        await call("GET", "v1/dashboard", key);
      } catch (error) {
        $("login-error").textContent = error.message;
        return;
      }
      if ($("remember").checked) sessionStorage.setItem(STORE, key);
      $("login-error").textContent = "";
      start(key);
    });
    $("logout").addEventListener("click", () => logout(""));
    const kept = sessionStorage.getItem(STORE);
    if (kept) start(kept);
  });
})();
