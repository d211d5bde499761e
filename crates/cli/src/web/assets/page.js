// The page of `new web`, and of `/export --html` (then it reads its data from the page itself).
// Text from the model, tools or files is only ever set as text; the one HTML inserted is the
// Markdown the server rendered with raw HTML escaped.
"use strict";
(function () {
  const $ = (sel) => document.querySelector(sel);
  const dataElement = document.getElementById("new-data");
  const isStatic = !!dataElement;
  let state = null;
  let byId = new Map();
  let kids = new Map(); // each node's children's ids, in tree order (the export's siblings)
  let live = null; // the answer streaming now: {box, text, reasoning}

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // The session's secret: from the address's fragment (`/#t=…`, which the browser never sends
  // to a server), kept in this tab's sessionStorage (this origin's only, port included), sent in
  // a header on every request. Never a cookie: a browser sends 127.0.0.1's cookies to every port.
  // A secret in the address replaces the tab's only when this server takes it: a link to this
  // page with another `#t=` (a model's, say) cannot lock the tab out.
  let token = null;
  let offered = null;
  if (!isStatic) {
    const m = /^#t=([0-9a-f]+)$/.exec(location.hash);
    if (m) {
      offered = m[1];
      history.replaceState(null, "", location.pathname);
    }
    token = sessionStorage.getItem("new-token");
  }

  function settleToken() {
    if (!offered || offered === token) return Promise.resolve();
    return fetch("/api/state", { credentials: "omit", cache: "no-store", headers: { "X-New-Token": offered } })
      .then((r) => {
        if (r.ok) {
          token = offered;
          sessionStorage.setItem("new-token", token);
        }
      })
      .catch(() => {});
  }

  function ask(path, options) {
    const o = Object.assign({ credentials: "omit", cache: "no-store" }, options || {});
    o.headers = Object.assign({ "X-New-Token": token || "" }, o.headers || {});
    return fetch(path, o);
  }

  function post(path, body) {
    return ask(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body || {}),
    });
  }

  // ---- the tree ----

  function onBranch() {
    const on = new Set();
    let id = state.cursor;
    while (id) {
      on.add(id);
      const n = byId.get(id);
      id = n ? n.parent : null;
    }
    return on;
  }

  function drawTree() {
    const tree = $("#tree");
    const on = onBranch();
    const frag = document.createDocumentFragment();
    for (const n of state.nodes) {
      const row = el("div", "node " + n.role);
      row.setAttribute("role", "treeitem");
      row.dataset.nodeId = n.id;
      if (n.id === state.cursor) row.dataset.current = "true";
      if (on.has(n.id)) row.classList.add("onbranch");
      if (n.undone) row.classList.add("undone");
      row.style.paddingLeft = 6 + Math.min(n.col, 40) * 14 + "px";
      row.appendChild(el("span", "num", n.n));
      if (n.fork) row.appendChild(el("span", "fork", n.fork === "last" ? "└ " : "├ "));
      row.appendChild(el("span", "who", n.role === "system" ? "system" : n.role + ": "));
      row.appendChild(el("span", "label", n.role === "system" ? "" : n.label));
      row.title = n.label || "";
      frag.appendChild(row);
    }
    tree.replaceChildren(frag);
    const current = tree.querySelector('[data-current="true"]');
    if (current && current.scrollIntoView) current.scrollIntoView({ block: "nearest" });
    $("#tree-title").textContent =
      "Tree · " + (state.conversation.title || state.conversation.id);
  }

  function goto(id) {
    if (isStatic) {
      state.cursor = id;
      draw();
    } else {
      post("/api/goto", { id: id });
    }
  }

  // ---- the branch ----

  function branchMessages() {
    if (!isStatic) return state.branch;
    const chain = [];
    let id = state.cursor;
    while (id) {
      const n = byId.get(id);
      if (!n) break;
      if (n.parent) {
        const m = Object.assign({}, n.message);
        const siblings = kids.get(n.parent) || [];
        if (siblings.length > 1) m.siblings = siblings;
        chain.push(m);
      }
      id = n.parent;
    }
    return chain.reverse();
  }

  function diffTable(diff) {
    const table = el("table", "diff");
    const rows = [];
    let left = [];
    let right = [];
    const flush = () => {
      const k = Math.max(left.length, right.length);
      for (let i = 0; i < k; i++) rows.push([left[i], right[i]]);
      left = [];
      right = [];
    };
    for (const line of String(diff).split("\n")) {
      if (line.startsWith("---") || line.startsWith("+++")) continue;
      if (line.startsWith("@@")) {
        flush();
        rows.push([{ t: line, c: "hunk" }, { t: line, c: "hunk" }]);
      } else if (line.startsWith("-")) left.push({ t: line.slice(1), c: "del" });
      else if (line.startsWith("+")) right.push({ t: line.slice(1), c: "add" });
      else {
        flush();
        const t = line.startsWith(" ") ? line.slice(1) : line;
        rows.push([{ t: t, c: "" }, { t: t, c: "" }]);
      }
    }
    flush();
    const head = el("tr");
    head.appendChild(el("th", "", "before"));
    head.appendChild(el("th", "", "after"));
    table.appendChild(head);
    for (const [a, b] of rows) {
      const tr = el("tr");
      tr.appendChild(el("td", a ? a.c : "", a ? a.t : ""));
      tr.appendChild(el("td", b ? b.c : "", b ? b.t : ""));
      table.appendChild(tr);
    }
    return table;
  }

  function callCard(name, args) {
    const card = el("div", "card call");
    card.appendChild(el("b", "", name));
    card.appendChild(el("pre", "", args));
    return card;
  }

  function messageBox(m) {
    const box = el("div", "msg " + m.role);
    box.dataset.messageId = m.id;
    const head = el("div", "head");
    head.appendChild(el("span", "", m.role + (m.model ? " · " + m.model : "")));
    if (m.siblings) {
      const i = m.siblings.indexOf(m.id);
      const prev = el("button", "", "<");
      prev.type = "button";
      prev.disabled = i <= 0;
      prev.addEventListener("click", () => goto(m.siblings[i - 1]));
      const next = el("button", "", ">");
      next.type = "button";
      next.disabled = i >= m.siblings.length - 1;
      next.addEventListener("click", () => goto(m.siblings[i + 1]));
      head.appendChild(prev);
      head.appendChild(el("span", "", i + 1 + "/" + m.siblings.length));
      head.appendChild(next);
    }
    if (m.interrupted) head.appendChild(el("span", "", "(interrupted)"));
    box.appendChild(head);
    if (m.reasoning) {
      const d = el("details", "reasoning");
      d.appendChild(el("summary", "", "reasoning"));
      d.appendChild(el("div", "", m.reasoning));
      box.appendChild(d);
    }
    if (m.html !== undefined) {
      const body = el("div", "body");
      body.innerHTML = m.html; // rendered by the server, raw HTML escaped
      box.appendChild(body);
    } else if (m.role === "tool") {
      box.className = "card result";
      box.appendChild(el("pre", "", m.text));
    } else {
      box.appendChild(el("pre", "", m.text));
    }
    for (const c of m.calls || []) box.appendChild(callCard(c.name, c.arguments));
    return box;
  }

  function drawBranch() {
    const messages = $("#messages");
    const frag = document.createDocumentFragment();
    for (const m of branchMessages()) frag.appendChild(messageBox(m));
    messages.replaceChildren(frag);
    messages.scrollTop = messages.scrollHeight;
  }

  // ---- status and conversations ----

  function drawStatus() {
    const s = state.status;
    if (!s) return;
    const bar = $("#status");
    const parts = [
      ["model", s.model],
      ["mode", s.mode],
      ["tokens", s.input_tokens + " in · " + s.output_tokens + " out"],
      ["context", s.context_percent === null || s.context_percent === undefined
        ? "?" : s.context_percent + "% of " + s.context_window],
      ["turns", s.turns],
      ["sandbox", s.sandbox === null ? "none" : s.sandbox ? "on" : "off"],
      ["hooks", s.hooks ? "on" : "none"],
    ];
    bar.replaceChildren();
    for (const [k, v] of parts) {
      const span = el("span", "", k + " ");
      span.dataset.status = k;
      span.appendChild(el("b", "", v));
      bar.appendChild(span);
    }
    const mcp = el("span", "", "MCP ");
    mcp.dataset.status = "mcp";
    if (!s.mcp.length) mcp.appendChild(el("b", "", "none"));
    for (const server of s.mcp) {
      const b = el("b", "mcp " + server.state, server.name + " " + server.state);
      b.dataset.mcpServer = server.name;
      b.dataset.mcpState = server.state;
      b.title = server.detail;
      mcp.appendChild(b);
      mcp.appendChild(document.createTextNode(" "));
    }
    bar.appendChild(mcp);
    const mode = $("#mode");
    if (mode && document.activeElement !== mode) mode.value = s.mode;
  }

  function drawConversations() {
    const list = $("#conversations");
    if (!list || !state.conversations) return;
    list.replaceChildren();
    for (const c of state.conversations) {
      const li = el("li", c.current ? "current" : "", (c.title || c.id) + " (" + c.messages + ")");
      li.dataset.conversationId = c.id;
      li.addEventListener("click", () => post("/api/send", { text: "/switch " + c.id }));
      list.appendChild(li);
    }
  }

  function draw() {
    byId = new Map(state.nodes.map((n) => [n.id, n]));
    if (isStatic) {
      kids = new Map();
      for (const n of state.nodes) {
        if (!n.parent) continue;
        if (!kids.has(n.parent)) kids.set(n.parent, []);
        kids.get(n.parent).push(n.id);
      }
    }
    drawTree();
    drawBranch();
    if (!isStatic) {
      drawStatus();
      drawConversations();
    }
  }

  // ---- /compare: the alternatives side by side ----

  function compareView(alternatives) {
    const grid = el("div", "compare");
    grid.style.gridTemplateColumns = "repeat(" + Math.min(alternatives.length, 4) + ", minmax(0, 1fr))";
    alternatives.forEach((a, i) => {
      const col = el("div", "alternative" + (a.current ? " current" : ""));
      col.dataset.nodeTip = a.tip;
      const head = el("div", "head");
      head.appendChild(el("b", "", (a.current ? "* " : "") + (i + 1) + "/" + alternatives.length + " [" + a.n + "]"));
      head.appendChild(el("span", "", (a.models.join(", ") || "?") + " · " + a.input_tokens + " in · " +
        a.output_tokens + " out · " + a.seconds + " s" + (a.cost === null ? "" : " · $" + a.cost.toFixed(4))));
      const go = el("button", "", "go there");
      go.type = "button";
      go.addEventListener("click", () => goto(a.tip));
      head.appendChild(go);
      col.appendChild(head);
      const body = el("div", "body");
      body.innerHTML = a.html; // rendered by the server, raw HTML escaped
      col.appendChild(body);
      if (a.files.length) col.appendChild(el("div", "files", a.files.join(", ")));
      grid.appendChild(col);
    });
    return grid;
  }

  // ---- the file panel (read-only; content only ever set as text) ----

  // `refresh`: the folder shown read again after a job (gone: the top instead, nothing said).
  function openPath(path, refresh) {
    post("/api/files", { path: path })
      .then((r) => r.json())
      .then((v) => {
        if (v.error) {
          if (!refresh) line(v.error, "error");
          else if (path !== ".") openPath(".", true);
        } else if (v.kind === "dir") {
          drawFolder(v);
        } else {
          $("#file-view").hidden = false;
          $("#file-name").textContent = v.path;
          $("#file-note").textContent =
            v.kind === "binary" ? "(binary, " + v.size + " bytes: not shown)" :
            v.truncated ? "(the first " + v.text.length + " characters of " + v.size + " bytes)" : "";
          $("#file-text").textContent = v.kind === "binary" ? "" : v.text;
        }
      });
  }

  let folder = ".";

  function drawFolder(v) {
    folder = v.path;
    const list = $("#files");
    $("#files-path").textContent = v.path;
    const frag = document.createDocumentFragment();
    if (v.path !== ".") {
      const up = el("li", "dir up", "..");
      const parent = v.path.includes("/") ? v.path.slice(0, v.path.lastIndexOf("/")) : ".";
      up.dataset.path = parent;
      frag.appendChild(up);
    }
    for (const e of v.entries) {
      const li = el("li", e.kind, (e.shown || e.name) + (e.kind === "dir" ? "/" : e.kind.startsWith("link") ? " @" : ""));
      li.dataset.path = e.path;
      li.dataset.kind = e.kind;
      if (e.kind === "link-out") li.title = "a link out of the working folder: not opened";
      frag.appendChild(li);
    }
    if (v.more || v.cut) {
      const more = el("li", "more", v.cut
        ? "… cut: the folder holds more than " + v.read + " entries, only the first " + v.read + " were read"
        : "… " + v.more + " more");
      more.dataset.cut = v.cut ? "true" : "false";
      frag.appendChild(more);
    }
    list.replaceChildren(frag);
  }

  // ---- what streams ----

  function liveAnswer() {
    if (!live) {
      const box = el("div", "msg assistant streaming");
      box.appendChild(el("div", "head", "assistant"));
      const reasoning = el("details", "reasoning");
      reasoning.appendChild(el("summary", "", "reasoning"));
      const thought = el("div", "");
      reasoning.appendChild(thought);
      reasoning.hidden = true;
      box.appendChild(reasoning);
      const text = el("div", "body streamed");
      text.style.whiteSpace = "pre-wrap";
      box.appendChild(text);
      $("#live").appendChild(box);
      live = { box: box, text: text, reasoning: reasoning, thought: thought };
    }
    return live;
  }

  function line(text, cls) {
    $("#live").appendChild(el("div", "line " + (cls || ""), text));
  }

  function approval(ev) {
    // Shown once, however it came (the event, or the state of a page loaded meanwhile).
    if (document.querySelector('[data-question="' + Number(ev.id) + '"]')) return;
    const box = el("div", "approval " + (ev.kind || "tool"));
    box.dataset.question = ev.id;
    box.appendChild(el("b", "", ev.title || (ev.label ? ev.label + ": " : "") + ev.tool + " asks to run"));
    if (ev.preview) box.appendChild(el("pre", "", ev.preview));
    const names = {
      approve: "Allow once",
      "approve-session": "Allow for this session",
      "approve-always": "Always (saved in " + (ev.file || "the user config") + ")",
      deny: "Deny",
      yes: "Yes",
      no: "No",
    };
    for (const action of ev.options) {
      const b = el("button", "", names[action] || action);
      b.type = "button";
      b.dataset.action = action;
      b.addEventListener("click", () => post("/api/answer", { id: ev.id, action: action }));
      box.appendChild(b);
    }
    $("#approvals").appendChild(box);
  }

  function onEvent(ev) {
    switch (ev.type) {
      case "state":
        refresh();
        break;
      case "busy":
        document.body.classList.toggle("busy", ev.busy);
        if (ev.busy) $("#live").replaceChildren();
        else {
          // What streamed is in the branch now; the diffs and the lines said stay until the next.
          for (const e of $("#live").querySelectorAll(".streaming, .call, .result:not(.with-diff)")) e.remove();
          // What the job changed in the folder shown.
          openPath(folder, true);
        }
        live = null;
        break;
      case "text":
        liveAnswer().text.textContent += ev.text;
        break;
      case "reasoning": {
        const a = liveAnswer();
        a.reasoning.hidden = false;
        a.thought.textContent += ev.text;
        break;
      }
      case "tool_call":
        live = null;
        $("#live").appendChild(callCard(ev.name, ev.arguments));
        break;
      case "tool_result": {
        const card = el("div", "card result" + (ev.ok ? "" : " failed") + (ev.diff ? " with-diff" : ""));
        card.appendChild(el("b", "", ev.name + (ev.ok ? "" : " (failed)") + ": " + ev.summary));
        if (ev.diff) card.appendChild(diffTable(ev.diff));
        else card.appendChild(el("pre", "", ev.content));
        $("#live").appendChild(card);
        break;
      }
      case "approval":
        approval(ev);
        break;
      case "answered": {
        const q = document.querySelector('[data-question="' + Number(ev.id) + '"]');
        if (q) q.remove();
        break;
      }
      case "turn_ended":
        if (ev.reason !== "complete") line("turn ended: " + ev.reason, "notice");
        break;
      case "output":
        line(ev.text, "");
        break;
      case "error":
        line(ev.text, "error");
        break;
      case "notice":
      case "subagent":
        line(ev.text, "notice");
        break;
      case "compare":
        $("#live").appendChild(compareView(ev.alternatives));
        break;
      case "exit":
        exited = true;
        line("The session has ended; this page can be closed.", "notice");
        break;
    }
  }

  function refresh() {
    return ask("/api/state")
      .then((r) => {
        if (r.status === 401) throw new Error("refused");
        return r.json();
      })
      .then((s) => {
        state = s;
        draw();
        // The question waiting (asked before this page was loaded, or while it was away).
        for (const q of $("#approvals").querySelectorAll("[data-question]")) {
          if (!s.pending || Number(q.dataset.question) !== s.pending.id) q.remove();
        }
        if (s.pending) approval(s.pending);
      })
      .catch((e) => {
        // Without the secret, or with another session's (this tab, an earlier `new web`).
        if (!token || e.message === "refused")
          line("Open the address `new web` printed (it holds this page's secret).", "error");
      });
  }

  // The event stream, read with fetch (an EventSource cannot send the secret's header): one JSON
  // object per `data:` line, events apart by a blank line. Opened again after a break, a second
  // later, then twice as long each time up to 30 s; never again once the secret is refused (the
  // `new web` this page belonged to has ended, and another one may listen on its port).
  let retryIn = 1000;
  function listen() {
    ask("/events", { headers: { Accept: "text/event-stream" } })
      .then((r) => {
        if (r.status === 401) throw new Error("unauthorized");
        if (!r.ok || !r.body) throw new Error("refused: " + r.status);
        retryIn = 1000;
        refresh();
        const reader = r.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        const pump = () =>
          reader.read().then(({ done, value }) => {
            if (done) throw new Error("ended");
            buffer += decoder.decode(value, { stream: true });
            let end;
            while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
              const block = buffer.slice(0, end);
              buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
              const data = block
                .split(/\r?\n/)
                .filter((l) => l.startsWith("data:"))
                .map((l) => l.slice(5).replace(/^ /, ""))
                .join("\n");
              if (data) onEvent(JSON.parse(data));
            }
            return pump();
          });
        return pump();
      })
      .catch((e) => {
        if (exited || !token) return;
        if (e.message === "unauthorized") {
          line(
            "This page's secret is no longer valid: the session of `new web` it belonged to has " +
              "ended. Open the address a running `new web` printed.",
            "error"
          );
          return;
        }
        setTimeout(listen, retryIn);
        retryIn = Math.min(retryIn * 2, 30000);
      });
  }
  let exited = false;

  // ---- start ----

  $("#tree").addEventListener("click", (e) => {
    const row = e.target.closest(".node");
    if (row) goto(row.dataset.nodeId);
  });

  if (isStatic) {
    state = JSON.parse(dataElement.textContent);
    draw();
    return;
  }

  const box = document.querySelector('textarea[name="message"]');
  box.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      const text = box.value;
      if (text.trim() === "") return;
      box.value = "";
      post("/api/send", { text: text });
    }
  });
  $("#composer").addEventListener("submit", (e) => e.preventDefault());
  $("#files").addEventListener("click", (e) => {
    const item = e.target.closest("li[data-path]");
    if (item) openPath(item.dataset.path);
  });
  $("#file-close").addEventListener("click", () => {
    $("#file-view").hidden = true;
  });
  $("#stop").addEventListener("click", () => post("/api/stop"));
  $("#mode").addEventListener("change", (e) => post("/api/mode", { mode: e.target.value }));
  settleToken().then(() => {
    openPath(".");
    listen();
    refresh();
  });
})();
