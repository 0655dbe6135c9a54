import LabstreamCore

/// The status page the HTTP listener serves at `/`: plain HTML, CSS and JavaScript kept in the
/// binary (nothing from a CDN, no build step). It holds no data: everything it shows comes from
/// `/api/` with the token, which the person types once; it is kept in the tab's sessionStorage
/// (gone when the tab closes; never a cookie, so another site cannot make the browser use it).
/// Every text from the API is set as text, never as HTML.
enum StatusPage {
    static func asset(_ name: String) -> HTTPListener.Response {
        let (type, text): (String, String)
        switch name {
        case "app.js": (type, text) = ("text/javascript; charset=utf-8", script)
        case "app.css": (type, text) = ("text/css; charset=utf-8", style)
        default: (type, text) = ("text/html; charset=utf-8", html)
        }
        return HTTPListener.Response(
            status: 200,
            headers: [
                ("Content-Type", type),
                ("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'"),
                ("Referrer-Policy", "no-referrer")
            ], body: Array(text.utf8))
    }

    static let html = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Labstream</title>
        <link rel="stylesheet" href="app.css">
        <script src="app.js" defer></script>
        </head>
        <body>
        <header><h1>Labstream</h1><button id="signout" hidden>Sign out</button></header>
        <main>
        <form id="login" hidden>
          <h2>Sign in</h2>
          <p>Paste the token: the file <code>http.token</code> in the daemon's data directory. It is kept in this tab only.</p>
          <input id="token" type="password" autocomplete="off" aria-label="token" placeholder="token">
          <button id="signin" type="submit">Sign in</button>
          <p id="login-error" class="error" role="alert"></p>
        </form>
        <div id="app" hidden>
          <p id="problem" class="error" role="alert"></p>
          <p id="notice" class="notice" role="status"></p>
          <section><h2>Servers</h2><ul id="servers" class="plain"></ul></section>
          <section><h2>Storage</h2><meter id="storage-meter" min="0" value="0"></meter><span id="storage"></span></section>
          <section><h2>Queue</h2><ol id="queue" class="plain"></ol><p id="noqueue" hidden>Nothing waits to be fetched.</p></section>
          <section><h2>Pinned and downloading</h2><ul id="files" class="plain"></ul><p id="nofiles" hidden>Nothing is stored or pinned yet.</p></section>
          <section><h2>Series monitors</h2><ul id="monitors" class="plain"></ul>
            <p id="nomonitors" hidden>No series is monitored. Search for one of its episodes below to monitor a series.</p></section>
          <section><h2>Find in the catalog</h2>
            <form id="searchform"><input id="search" type="search" placeholder="title, series, library…" aria-label="search"><button type="submit">Search</button></form>
            <ul id="series" class="plain"></ul>
            <ul id="results" class="plain"></ul></section>
          <section><h2>Recent events</h2><ul id="events" class="plain"></ul></section>
        </div>
        </main>
        </body>
        </html>
        """#

    static let style = #"""
        * { box-sizing: border-box; }
        body { font: 15px/1.4 system-ui, sans-serif; margin: 0; color: #1b1b1b; background: #f6f6f4; }
        header { display: flex; justify-content: space-between; align-items: center; padding: .5rem 1rem; background: #23395d; color: #fff; }
        header h1 { font-size: 1.2rem; margin: 0; }
        main { max-width: 60rem; margin: 0 auto; padding: .5rem 1rem 2rem; }
        section { background: #fff; border-radius: 6px; padding: .5rem 1rem; margin: .75rem 0; }
        h2 { font-size: 1rem; margin: .25rem 0 .5rem; }
        .plain { list-style: none; margin: 0; padding: 0; }
        li { padding: .4rem 0; border-top: 1px solid #eee; overflow-wrap: anywhere; }
        li:first-child { border-top: 0; }
        .path { display: block; }
        .line { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; font-size: .9rem; color: #444; }
        progress, meter { width: 100%; height: 1rem; }
        .dot { display: inline-block; width: .7rem; height: .7rem; border-radius: 50%; margin-right: .4rem; background: #b00; }
        .dot.online { background: #1a7f37; }
        .state { font-weight: 600; }
        .error { color: #b00; }
        button { font: inherit; padding: .3rem .8rem; border-radius: 4px; border: 1px solid #888; background: #fafafa; cursor: pointer; }
        button[aria-pressed="true"] { background: #23395d; color: #fff; border-color: #23395d; }
        button:disabled { cursor: default; }
        .steer { margin-top: .3rem; }
        .pos { font-weight: 600; }
        input { font: inherit; padding: .3rem; width: min(100%, 24rem); }
        .failed .state { color: #b00; }
        .notice { color: #23395d; white-space: pre-line; }
        .notice:empty, .error:empty { display: none; }
        .why { flex-basis: 100%; }
        .trouble { color: #8a4b00; flex-basis: 100%; }
        select { font: inherit; padding: .25rem; max-width: 100%; }
        """#

    static let script = #"""
        "use strict";
        const $ = (id) => document.getElementById(id);
        let token = sessionStorage.getItem("labstream-token");
        const meters = new Map();  // path -> samples [{t, bytes}] for rates

        function el(tag, cls, text) {
          const e = document.createElement(tag);
          if (cls) e.className = cls;
          if (text !== undefined) e.textContent = text;
          return e;
        }
        function bytes(n) {
          const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0;
          while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
          return (i ? n.toFixed(1) : n) + " " + u[i];
        }
        function duration(s) {
          if (s < 60) return Math.ceil(s) + " s";
          if (s < 3600) return Math.floor(s / 60) + " min " + Math.floor(s % 60) + " s";
          return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
        }
        async function api(method, path, body) {
          const init = { method, headers: { "Authorization": "Bearer " + token } };
          if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
          const r = await fetch(path, init);
          const data = await r.json().catch(() => ({}));
          if (r.status === 401) { signOut(data.detail || "The token was refused."); throw new Error("refused"); }
          if (!r.ok) throw new Error(data.detail || ("HTTP " + r.status));
          return data;
        }
        function signOut(why) {
          token = null; sessionStorage.removeItem("labstream-token");
          $("app").hidden = true; $("signout").hidden = true; $("login").hidden = false;
          $("login-error").textContent = why || "";
        }
        function rate(path, present) {
          const now = performance.now() / 1000;
          let s = meters.get(path) || [];
          if (s.length && present < s[s.length - 1].bytes) s = [];
          s.push({ t: now, bytes: present });
          while (s.length > 2 && s[1].t <= now - 8) s.shift();
          meters.set(path, s);
          const span = s[s.length - 1].t - s[0].t;
          return span >= 1.5 ? (s[s.length - 1].bytes - s[0].bytes) / span : null;
        }
        // What a command did, said back: a retry that found no room again is told in the
        // daemon's own words (`parked_again`), never just swallowed.
        const DONE = { pin: "Pinned", unpin: "Unpinned", cancel: "Cancelled", pause: "Paused", resume: "Resumed",
          retry: "Tried again", verify: "Checking again" };
        async function act(command, body, button, said) {
          button.disabled = true;
          $("notice").textContent = "";
          try {
            const answer = await api("POST", "/api/" + command, body);
            $("problem").textContent = "";
            const again = answer.parked_again || [];
            if (again.length) $("notice").textContent = again.map((p) => "There is still no room: " + p.message).join("\n");
            else if (said || DONE[command]) $("notice").textContent = (said || DONE[command]) + (body.paths ? ": " + body.paths.join(", ") : "");
            poll(true); searchAgain(); loadMonitors();
          }
          catch (e) { if (e.message !== "refused") $("problem").textContent = e.message; }
          finally { button.disabled = false; }
        }
        function button(label, command, path) {
          const b = el("button", command, label); b.type = "button";
          b.addEventListener("click", () => act(command, { paths: [path] }, b)); return b;
        }
        // A reason in plain words for someone who never opens a terminal: what happened and what
        // to do. Codes the page has no words for show the daemon's sentence.
        const REASONS = {
          storage_full: "Paused: the disk that keeps the downloads is full. It goes on by itself once there is room. "
            + "To make room, unpin or cancel files you no longer need here, then press Retry.",
          over_budget: "Paused: this would take the downloads over the space Labstream may use (its max_size). It goes on by itself "
            + "once there is room: unpin or cancel other files here, then press Retry, or ask whoever looks after the home server to raise the limit.",
          paused_by_user: "Paused by someone here. Press Resume to go on.",
          server_unavailable: "Waiting for its server, which does not answer. It goes on by itself when the server is back.",
          server_away: "Waiting for its server, which does not answer. It goes on by itself when the server is back.",
          sign_in_refused: "Waiting: its server no longer accepts Labstream's sign-in. Someone must sign in again on the home server "
            + "(see Servers); it then goes on by itself.",
        };
        function why(f) {
          const words = REASONS[f.reason] || f.message;
          if (!words) return null;
          const span = el("span", "why", words);
          if (REASONS[f.reason] && f.message) span.title = f.message;
          return span;
        }
        // The buttons that make sense for a file in its state.
        function fileControls(f) {
          const out = [];
          if (f.pinned && ["queued", "preparing", "downloading"].includes(f.state)) out.push(button("Pause", "pause", f.path));
          if (f.state === "paused") out.push(f.reason === "paused_by_user" ? button("Resume", "resume", f.path) : button("Retry", "retry", f.path));
          if (f.state === "failed") out.push(button("Retry", "retry", f.path));
          const whole = f.bytes_total > 0 && f.bytes_present >= f.bytes_total;
          if (["complete", "unverified"].includes(f.state) || (f.state === "failed" && whole)) out.push(button("Verify", "verify", f.path));
          return out;
        }
        // A queue control: `current` marks what already holds (the file is first, or has that
        // priority); it is shown pressed and cannot be pressed again.
        function control(label, cls, command, body, current) {
          const b = el("button", cls, label); b.type = "button";
          if (cls.startsWith("priority-")) b.setAttribute("aria-pressed", current ? "true" : "false");
          if (current) b.disabled = true;
          else b.addEventListener("click", () => act(command, body, b));
          return b;
        }
        function renderQueue(data) {
          const queue = $("queue"); queue.replaceChildren();
          $("noqueue").hidden = data.queue.length > 0;
          for (const f of data.queue) {
            const li = el("li", f.state);
            li.dataset.path = f.path; li.dataset.state = f.state; li.dataset.priority = f.priority; li.dataset.position = f.position;
            const pct = f.bytes_total > 0 ? Math.floor(f.bytes_present * 100 / f.bytes_total) : 0;
            const bar = el("progress"); bar.max = 100; bar.value = pct;
            const line = el("div", "line");
            line.append(el("span", "pos", f.position + "."), el("span", "priority", f.priority), el("span", "state", f.state), el("span", "pct", pct + "%"));
            if (f.rate) line.append(el("span", "rate", bytes(f.rate) + "/s"));
            if (typeof f.eta === "number") line.append(el("span", "eta", duration(f.eta) + " left"));
            if (f.reading) line.append(el("span", "reading", "being played"));
            if (f.message) line.append(el("span", "why", f.message));
            const steer = el("div", "line steer");
            steer.append(control("First", "first", "move", { path: f.path }, f.position === 1));
            for (const p of ["high", "normal", "low"]) {
              steer.append(control(p[0].toUpperCase() + p.slice(1), "priority-" + p, "priority", { paths: [f.path], priority: p }, f.priority === p));
            }
            li.append(el("span", "path", f.path + (f.quality ? " (" + f.quality + " copy)" : "")), bar, line, steer);
            queue.append(li);
          }
        }
        const REACH = { online: "online", offline: "not answering", "auth-failed": "sign-in refused" };
        // What is wrong with a server, in words, from the codes the status carries.
        function serverTrouble(s) {
          const out = [];
          if (s.reachability === "offline") {
            out.push("It does not answer. What is already here still plays; downloads from it wait and go on by themselves when it is back. "
              + "If it stays away, check that the home server is switched on and connected.");
          } else if (s.reachability === "auth-failed") {
            out.push("It no longer accepts Labstream's sign-in (signed out, or its password changed). Downloads from it wait. "
              + "Whoever looks after the home server must sign in again" + (s.sign_in_again ? " with: " + s.sign_in_again : "")
              + "; they then go on by themselves.");
          } else if (s.reachability !== "online") {
            out.push("It cannot be used right now (" + s.reachability + ").");
          }
          if (s.events === "lost") {
            const wait = typeof s.events_retry_at === "number" ? Math.max(0, Math.round(s.events_retry_at - Date.now() / 1000)) : null;
            out.push("Live updates from it were lost" + (s.events_why ? " (" + s.events_why + ")" : "") + "; Labstream tries again"
              + (wait !== null ? " in " + duration(wait) : "") + ". Changes on the server still show up at the next catalog refresh.");
          }
          return out;
        }
        function render(data) {
          const servers = $("servers"); servers.replaceChildren();
          for (const s of data.servers) {
            const li = el("li"); li.dataset.server = s.name; li.dataset.reachability = s.reachability; li.dataset.events = s.events || "";
            const dot = el("span", "dot" + (s.reachability === "online" ? " online" : ""));
            li.append(dot, el("span", "name", s.name + " (" + s.type + "): "), el("span", "reach", REACH[s.reachability] || s.reachability),
              el("span", "sync", s.last_sync ? " — last sync " + new Date(s.last_sync * 1000).toLocaleString() : " — never synced"));
            for (const words of serverTrouble(s)) li.append(el("div", "line trouble", words));
            servers.append(li);
          }
          const st = data.storage;
          $("storage-meter").max = st.budget || Math.max(st.used + (st.free || 0), 1);
          $("storage-meter").value = st.used;
          $("storage").textContent = bytes(st.used) + " used" + (st.budget ? " of " + bytes(st.budget) : " (no max_size)") + (st.free !== undefined ? ", " + bytes(st.free) + " free on disk" : "");
          const files = $("files"); files.replaceChildren();
          $("nofiles").hidden = data.files.length > 0;
          for (const f of data.files) {
            const li = el("li", f.state); li.dataset.path = f.path; li.dataset.state = f.state;
            const pct = f.bytes_total > 0 ? Math.floor(f.bytes_present * 100 / f.bytes_total) : 100;
            const bar = el("progress"); bar.max = 100; bar.value = pct;
            const line = el("div", "line");
            line.append(el("span", "state", f.state), el("span", "pct", pct + "%"), el("span", "size", bytes(f.bytes_present) + " of " + bytes(f.bytes_total)));
            const r = rate(f.path, f.bytes_present);
            if (["downloading", "queued", "partial"].includes(f.state) && r !== null) {
              line.append(el("span", "rate", bytes(r) + "/s"));
              if (r > 0) line.append(el("span", "eta", duration((f.bytes_total - f.bytes_present) / r) + " left"));
            }
            li.dataset.reason = f.reason || "";
            const words = why(f);
            if (words) line.append(words);
            line.append(...fileControls(f));
            if (f.pinned) line.append(button("Unpin", "unpin", f.path)); else line.append(button("Pin", "pin", f.path));
            if (!["complete", "unverified", "not-local"].includes(f.state)) line.append(button("Cancel", "cancel", f.path));
            li.append(el("span", "path", f.path), bar, line);
            files.append(li);
          }
          const events = $("events"); events.replaceChildren();
          for (const e of data.events) {
            const li = el("li", e.outcome); li.dataset.path = e.path;
            li.append(el("span", "state", e.outcome + " "), el("span", "path", e.path));
            const line = el("div", "line", new Date(e.at * 1000).toLocaleString() + (e.message ? " — " + e.message : ""));
            li.append(line); events.append(li);
          }
          if (!data.events.length) events.append(el("li", "", "Nothing finished since the daemon started."));
        }
        // Series monitors: listed from GET /api/monitors, started from a search's series and
        // stopped here (POST /api/monitor, settings null); their episodes stay pinned.
        let monitors = [];
        const MODES = [["future", "New episodes from now on"], ["latest-season", "The latest season"], ["all", "Every episode"]];
        function modeWords(mode) {
          const known = MODES.find((m) => m[0] === mode);
          if (known) return known[1];
          return mode.startsWith("seasons=") ? "Seasons " + mode.slice(8).split(",").join(", ") : mode;
        }
        function stopButton(folder) {
          const b = el("button", "unmonitor", "Stop monitoring"); b.type = "button";
          b.addEventListener("click", () => act("monitor", { paths: [folder], settings: null }, b,
            "Stopped monitoring (its episodes stay pinned; unpin them to let them go)"));
          return b;
        }
        function renderMonitors() {
          const list = $("monitors"); list.replaceChildren();
          $("nomonitors").hidden = monitors.length > 0;
          for (const m of monitors) {
            const li = el("li"); li.dataset.path = m.path || ""; li.dataset.mode = m.mode;
            const line = el("div", "line");
            line.append(el("span", "mode", modeWords(m.mode)));
            if (typeof m.episodes === "number") line.append(el("span", "held", m.episodes + (m.episodes === 1 ? " episode" : " episodes") + " kept, " + bytes(m.bytes)));
            if (m.delete_watched) line.append(el("span", "", "watched episodes are removed"));
            if (m.max_storage) line.append(el("span", "", "at most " + bytes(m.max_storage)));
            if (m.path) line.append(stopButton(m.path));
            else line.append(el("span", "why", "This series is no longer in " + m.server + "'s catalog."));
            li.append(el("span", "path", m.path || m.server + ": series " + m.series_id), line);
            list.append(li);
          }
        }
        async function loadMonitors() {
          if (!token) return;
          try { monitors = (await api("GET", "/api/monitors")).monitors || []; renderMonitors(); renderSeries(); }
          catch (e) { if (e.message !== "refused") $("problem").textContent = e.message; }
        }
        let lastHits = [];
        // The series the search's episodes belong to, each to monitor or stop monitoring.
        function renderSeries() {
          const list = $("series"); list.replaceChildren();
          const folders = [...new Set(lastHits.map((f) => f.series).filter((s) => s))];
          for (const folder of folders) {
            const li = el("li"); li.dataset.series = folder;
            const line = el("div", "line");
            const current = monitors.find((m) => m.path === folder);
            if (current) {
              li.dataset.mode = current.mode;
              line.append(el("span", "mode", "Monitored: " + modeWords(current.mode)), stopButton(folder));
            } else {
              const pick = el("select", "mode"); pick.setAttribute("aria-label", "what to keep of " + folder);
              for (const [value, words] of MODES) { const o = el("option", "", words); o.value = value; pick.append(o); }
              const b = el("button", "monitor", "Monitor this series"); b.type = "button";
              b.addEventListener("click", () => act("monitor", { paths: [folder], settings: pick.value }, b, "Monitoring (" + modeWords(pick.value) + ")"));
              line.append(pick, b);
            }
            li.append(el("span", "path", "Series: " + folder.split("/").pop()), line);
            list.append(li);
          }
        }
        let polling = null, polls = 0;
        async function poll(once) {
          if (!token) return;
          try {
            const [status, queue] = await Promise.all([api("GET", "/api/status"), api("GET", "/api/queue")]);
            render(status); renderQueue(queue); $("problem").textContent = "";
          }
          catch (e) { if (e.message !== "refused") $("problem").textContent = "The daemon did not answer: " + e.message; }
          // What monitors hold changes slowly: asked every tenth poll.
          if (!once && polls++ % 10 === 0) loadMonitors();
          if (!once && token) polling = setTimeout(poll, 1000);
        }
        let lastSearch = "";
        async function search(text) {
          lastSearch = text;
          const results = $("results"); results.replaceChildren();
          lastHits = []; renderSeries();
          if (!text.trim()) return;
          try {
            const data = await api("GET", "/api/search?q=" + encodeURIComponent(text));
            lastHits = data.files; renderSeries();
            for (const f of data.files) {
              const li = el("li", f.state); li.dataset.path = f.path; li.dataset.state = f.state;
              const line = el("div", "line");
              line.append(el("span", "state", f.state), el("span", "size", bytes(f.bytes_total)));
              line.append(f.pinned ? button("Unpin", "unpin", f.path) : button("Pin", "pin", f.path));
              li.append(el("span", "path", f.path), line); results.append(li);
            }
            if (!data.files.length) results.append(el("li", "", "No file matches."));
          } catch (e) { if (e.message !== "refused") $("problem").textContent = e.message; }
        }
        function searchAgain() { if (lastSearch) search(lastSearch); }
        async function signIn(candidate) {
          token = candidate;
          try {
            await api("GET", "/api/status");
            sessionStorage.setItem("labstream-token", token);
            $("login").hidden = true; $("app").hidden = false; $("signout").hidden = false; $("login-error").textContent = "";
            clearTimeout(polling); poll();
          } catch (e) { if (e.message !== "refused") signOut(e.message); }
        }
        document.addEventListener("DOMContentLoaded", () => {
          $("login").addEventListener("submit", (ev) => { ev.preventDefault(); signIn($("token").value.trim()); $("token").value = ""; });
          $("signout").addEventListener("click", () => { clearTimeout(polling); signOut(""); });
          $("searchform").addEventListener("submit", (ev) => { ev.preventDefault(); search($("search").value); });
          if (token) signIn(token); else signOut("");
        });
        """#
}
