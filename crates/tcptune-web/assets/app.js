// tcptune watch --web / tcptune view: the connection table and one connection's scope.
// Data: GET /api/connections?filter=EXPR (the table) and the Server-Sent Events of
// /api/stream?conn=ID (a snapshot of the connection's history, then its updates).
"use strict";

const $ = (s) => document.querySelector(s);
const params = new URLSearchParams(location.search);
const state = {
  rows: [], sortKey: "rate_bps", sortDir: -1, filter: params.get("filter") || "",
  conn: params.get("conn"), stream: null, view: null, frozen: null, dirty: false,
};
const KINDS = ["retransmit", "rto", "cong_state", "zero_window"];
const COLORS = { blue: "#0072B2", red: "#D55E00", green: "#009E73", purple: "#CC79A7", orange: "#E69F00", sky: "#56B4E9", grey: "#999999" };

function fmtRate(bps) {
  if (bps == null) return "";
  const u = [[1e9, "Gbit/s"], [1e6, "Mbit/s"], [1e3, "kbit/s"]];
  for (const [d, n] of u) if (bps >= d) return (bps / d).toFixed(bps / d >= 100 ? 0 : 1) + " " + n;
  return bps.toFixed(0) + " bit/s";
}

// ---- the table -------------------------------------------------------------------------
function showSource(src) {
  const b = $("#source");
  b.dataset.perAck = String(src.per_ack);
  b.className = "banner" + (src.per_ack ? "" : " polled");
  const every = (src.interval_s * 1000).toFixed(0) + " ms";
  // What `view` opened besides a recording (cmd/view_open.rs) was not polled from sock_diag:
  // its reason says what it is.
  const opened = src.reason && /^(a capture|an experiment's|a trial's) /.test(src.reason);
  b.textContent = src.per_ack
    ? "Per-ACK data from the kernel's tcp_probe tracepoint; table and rates polled every " + every + "."
    : opened
      ? "From " + src.reason + "."
      : "Polled from sock_diag every " + every + (src.reason ? " — " + src.reason : "") + ".";
}

async function loadTable() {
  let res;
  try {
    res = await fetch("api/connections?filter=" + encodeURIComponent(state.filter));
  } catch (e) { return; }
  if (!res.ok) { $("#filter-error").textContent = (await res.text()).trim(); return; }
  $("#filter-error").textContent = "";
  const t = await res.json();
  showSource(t.source);
  state.rows = t.connections;
  drawTable();
}

function drawTable() {
  const k = state.sortKey, d = state.sortDir;
  const rows = state.rows.slice().sort((a, b) => {
    const x = a[k], y = b[k];
    if (x == null) return 1; if (y == null) return -1;
    return (typeof x === "number" ? x - y : String(x).localeCompare(String(y))) * d;
  });
  const tb = $("#conns tbody");
  tb.textContent = "";
  for (const r of rows) {
    const tr = document.createElement("tr");
    tr.dataset.id = r.id;
    tr.dataset.limit = r.limit;
    if (r.id === state.conn) tr.className = "chosen";
    const cells = [r.label || r.local, r.label ? "" : r.remote, r.state, fmtRate(r.rate_bps), r.srtt_ms == null ? "" : r.srtt_ms.toFixed(2) + " ms", r.limit.replace(/_/g, " "), r.verdict];
    cells.forEach((c, i) => {
      const td = document.createElement("td");
      td.textContent = c;
      if (i === 3 || i === 4) td.className = "num";
      if (i === 6) td.className = "verdict";
      tr.appendChild(td);
    });
    tr.addEventListener("click", () => choose(r.id));
    tb.appendChild(tr);
  }
  document.querySelectorAll("#conns th").forEach((th) => {
    th.className = th.dataset.key === k ? (d > 0 ? "sorted-asc" : "sorted-desc") : "";
  });
}

document.querySelectorAll("#conns th").forEach((th) => th.addEventListener("click", () => {
  const k = th.dataset.key;
  state.sortDir = state.sortKey === k ? -state.sortDir : (k === "rate_bps" ? -1 : 1);
  state.sortKey = k;
  drawTable();
}));
$("#filter").value = state.filter;
$("#filter-form").addEventListener("submit", (e) => { e.preventDefault(); state.filter = $("#filter").value; loadTable(); });

// ---- the scope -----------------------------------------------------------------------------
function chart(id, series, extra) {
  const el = $(id);
  const opts = Object.assign({
    width: Math.max(480, el.clientWidth || 520), height: 220,
    scales: { x: { time: false } }, legend: { live: false },
    series: [{ label: "t (s)" }].concat(series),
    axes: [{ label: "s" }, { size: 70 }],
  }, extra || {});
  return new uPlot(opts, [[]].concat(series.map(() => [])), el);
}

let charts = null;
function makeCharts() {
  if (charts) return;
  const line = (label, stroke, more) => Object.assign({ label, stroke, width: 1.5, points: { show: false } }, more || {});
  const band = (label, fill) => ({ label, stroke: fill, fill, width: 0, points: { show: false } });
  charts = {
    rate: chart("#c-rate", [line("goodput", COLORS.blue), line("delivery rate", COLORS.red)]),
    win: chart("#c-win", [line("cwnd", COLORS.blue), line("peer window", COLORS.red), line("ssthresh", COLORS.green, { dash: [5, 5] }), line("in flight", COLORS.purple)]),
    rtt: chart("#c-rtt", [line("srtt", COLORS.blue), line("min RTT", COLORS.green), line("RTTVAR", COLORS.orange)]),
    seq: chart("#c-seq", [line("snd_una", COLORS.blue), line("snd_nxt", COLORS.red)]),
    triage: chart("#c-triage", [band("application", COLORS.grey), band("congestion", COLORS.orange), band("send buffer", COLORS.purple), band("receiver window", COLORS.red)],
      { scales: { x: { time: false }, y: { range: [0, 100] } } }),
    events: chart("#c-events", KINDS.map((k, i) => ({ label: k.replace(/_/g, " "), stroke: [COLORS.orange, COLORS.red, COLORS.blue, COLORS.purple][i], paths: () => null, points: { show: true, size: 8 } })),
      { scales: { x: { time: false }, y: { range: [0, KINDS.length + 1] } } }),
  };
}

const col = (pts, f) => pts.map((p) => { const v = f(p); return v == null ? null : v; });
const kib = (v) => (v == null ? null : v / 1024);
const mbit = (v) => (v == null ? null : v / 1e6);

function set(name, data, count) {
  charts[name].setData(data);
  charts[name].root.parentElement.dataset.points = String(count);
}

// Update latency, event to pixel (a hidden hook for `bench/web` and the tests): a streamed
// update says when its sample or event was taken (taken_ms, the server's CLOCK_REALTIME);
// once a redraw has drawn it, the next animation frame notes the page's wall clock.
const latency = { pending: [], ms: [], updates: 0, first: null, last: null, undrawn: 0 };
const LATENCY_KEPT = 100000;
window.tcptuneLatency = () => ({
  ms: latency.ms.slice(), updates: latency.updates, undrawn: latency.undrawn + latency.pending.length,
  span_ms: latency.first == null ? 0 : latency.last - latency.first, stream: $("#detail").dataset.stream,
});
let streamEnded;
window.tcptuneEnded = new Promise((r) => { streamEnded = r; });
const wallNow = () => performance.timeOrigin + performance.now();

function noteDrawn() {
  if (!latency.pending.length) return;
  const taken = latency.pending;
  latency.pending = [];
  requestAnimationFrame(() => {
    const now = wallNow();
    for (const t of taken) if (latency.ms.length < LATENCY_KEPT) latency.ms.push(now - t);
  });
}

function redraw() {
  const v = state.view;
  if (!v || !charts || state.frozen) return;
  state.dirty = false;
  const pts = v.points, xs = pts.map((p) => p.t_s);
  set("rate", [xs, col(pts, (p) => mbit(p.goodput_bps)), col(pts, (p) => mbit(p.delivery_rate_bps))], pts.length);
  if (v.acks.length) {
    // Per ACK from the tracepoint: in flight is snd_nxt - snd_una (sent, not yet acknowledged).
    const a = v.acks;
    set("win", [a.map((p) => p.t_s), a.map((p) => kib(p.cwnd_bytes)), a.map((p) => kib(p.snd_wnd_bytes)), a.map((p) => kib(p.ssthresh_bytes)), a.map((p) => kib(p.nxt - p.una))], a.length);
  } else {
    set("win", [xs, col(pts, (p) => kib(p.cwnd_bytes)), col(pts, (p) => kib(p.snd_wnd_bytes)), col(pts, (p) => kib(p.ssthresh_bytes)), col(pts, (p) => kib(p.inflight_bytes))], pts.length);
  }
  set("rtt", [xs, col(pts, (p) => p.srtt_ms), col(pts, (p) => p.min_rtt_ms), col(pts, (p) => p.rttvar_ms)], pts.length);
  if (v.acks.length) {
    const a = v.acks;
    $("#seq-caption").textContent = "Time-sequence (Stevens), per ACK: snd_una and snd_nxt (KiB since the first traced)";
    set("seq", [a.map((p) => p.t_s), a.map((p) => p.una / 1024), a.map((p) => p.nxt / 1024)], a.length);
  } else {
    const base = pts.length ? (pts[0].acked_bytes || 0) : 0;
    set("seq", [xs, col(pts, (p) => p.acked_bytes == null ? null : (p.acked_bytes - base) / 1024),
      col(pts, (p) => (p.acked_bytes == null || p.inflight_bytes == null) ? null : (p.acked_bytes + p.inflight_bytes - base) / 1024)], pts.length);
  }
  // Stacked: each band is drawn as the sum of itself and those under it, top first.
  const sh = pts.filter((p) => p.shares);
  const sx = sh.map((p) => p.t_s);
  const s = (p, f) => 100 * f(p.shares);
  set("triage", [sx,
    sh.map((p) => s(p, (x) => x.rwnd + x.sndbuf + x.network + (x.application || 0))),
    sh.map((p) => s(p, (x) => x.rwnd + x.sndbuf + x.network)),
    sh.map((p) => s(p, (x) => x.rwnd + x.sndbuf)),
    sh.map((p) => s(p, (x) => x.rwnd))], sh.length);
  const ev = v.events.slice().sort((a, b) => a.t_s - b.t_s);
  set("events", [ev.map((e) => e.t_s)].concat(KINDS.map((k, i) => ev.map((e) => (e.kind === k ? i + 1 : null)))), ev.length);
  showDetail();
  noteDrawn();
}

function showDetail() {
  const v = state.view, d = v.detail, row = v.row;
  const limit = d ? d.limit : row ? row.limit : "";
  $("#verdict").dataset.limit = limit;
  $("#verdict").textContent = d ? d.verdict : row ? row.verdict : "";
  const ul = $("#fixes");
  ul.textContent = "";
  for (const f of d ? d.fixes : []) { const li = document.createElement("li"); li.textContent = f; ul.appendChild(li); }
  if (d) {
    const n = d.negotiated, yn = (b) => (b == null ? "?" : b ? "on" : "off");
    $("#options").textContent = "Options: SACK " + yn(n.sack) + ", timestamps " + yn(n.timestamps) + ", window scaling " + yn(n.window_scaling) +
      (n.snd_wscale != null ? " (peer ×2^" + n.snd_wscale + ", ours ×2^" + n.rcv_wscale + ")" : "") + ", ECN " + yn(n.ecn) + ", MSS " + (n.snd_mss || "?");
  }
  if (v.closed_s != null) $("#verdict").textContent += " (closed at " + v.closed_s.toFixed(1) + " s)";
}

function armed(trigger) {
  const box = document.querySelector('input[data-trigger="' + trigger + '"]');
  return box && box.checked;
}

// The page keeps what the store keeps (its bounds come before the snapshot): the oldest go once
// a list is a tenth over its cap or older than the span, so redraws do not slow as time passes.
function keep(list, cap) {
  const b = state.bounds;
  if (!b) return;
  let cut = list.length > cap + (cap / 10 | 0) ? list.length - cap : 0;
  const newest = list.length ? list[list.length - 1].t_s : 0;
  while (cut < list.length && list[cut].t_s < newest - b.span_s) cut += 1;
  if (cut > 0) list.splice(0, cut);
}

function apply(u) {
  const v = state.view;
  const b = state.bounds || {};
  switch (u.type) {
    case "point": v.points.push(u.point); keep(v.points, b.points); break;
    case "ack": v.acks.push(u.ack); keep(v.acks, b.acks); break;
    case "event": v.events.push(u.event); keep(v.events, b.events); break;
    case "detail": v.detail = u.detail; break;
    case "closed": v.closed_s = u.t_s; break;
    case "freeze":
      if (!state.frozen && armed(u.trigger)) {
        redraw(); // show what led up to it, then hold
        state.frozen = u;
        // Updates held back by the freeze are never drawn as they come: not a latency.
        latency.undrawn += latency.pending.length;
        latency.pending = [];
        $("#frozen").dataset.frozen = u.trigger;
        $("#frozen").textContent = "frozen at " + u.t_s.toFixed(2) + " s on " + u.trigger.replace(/_/g, " ");
        $("#resume").hidden = false;
      }
      break;
  }
  state.dirty = true;
}

$("#resume").addEventListener("click", () => {
  state.frozen = null;
  $("#frozen").dataset.frozen = "";
  $("#frozen").textContent = "";
  $("#resume").hidden = true;
  redraw();
});

function choose(id) {
  if (state.stream) state.stream.close();
  state.conn = id;
  state.view = null;
  state.frozen = null;
  const url = new URL(location.href);
  url.searchParams.set("conn", id);
  history.replaceState(null, "", url);
  $("#detail").hidden = false;
  $("#detail").dataset.conn = id;
  makeCharts();
  drawTable();
  // `for=SECONDS` in the page's URL: stream that long, then stop (a headless browser's dump
  // waits for open requests to end).
  const streamFor = params.get("for");
  const es = new EventSource("api/stream?conn=" + encodeURIComponent(id) + (streamFor ? "&for=" + encodeURIComponent(streamFor) : ""));
  // The stream's state, for the eye and for tests: connecting, open, live, error.
  $("#detail").dataset.stream = "connecting";
  es.onopen = () => { $("#detail").dataset.stream = "open"; };
  es.onerror = () => { $("#detail").dataset.stream = "error"; };
  es.addEventListener("bounds", (e) => { state.bounds = JSON.parse(e.data); });
  es.addEventListener("snapshot", (e) => {
    $("#detail").dataset.stream = "live";
    const v = JSON.parse(e.data);
    state.view = v;
    $("#detail-title").textContent = v.row ? v.row.local + " → " + v.row.remote + " (cookie " + v.id + ")" : "connection " + v.id;
    redraw();
  });
  es.addEventListener("update", (e) => {
    if (!state.view) return;
    const u = JSON.parse(e.data);
    const now = wallNow();
    latency.updates += 1;
    if (latency.first == null) latency.first = now;
    latency.last = now;
    if (u.taken_ms != null && !state.frozen) latency.pending.push(u.taken_ms);
    apply(u);
  });
  es.addEventListener("end", () => { es.close(); $("#detail").dataset.stream = "ended"; redraw(); requestAnimationFrame(() => requestAnimationFrame(streamEnded)); });
  state.stream = es;
}

// Several redraws a second at most, whatever the update rate.
setInterval(() => { if (state.dirty) redraw(); }, 200);
setInterval(loadTable, 1000);
loadTable().then(() => { if (state.conn) choose(state.conn); });
