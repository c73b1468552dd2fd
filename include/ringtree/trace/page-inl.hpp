#pragma once
// page.hpp's cold part (core/compiled.hpp): the bodies of its functions,
// compiled where RINGTREE_DEFINES is 1.
#include <ringtree/trace/page.hpp>

namespace ringtree {

RINGTREE_FUNC std::string_view renderer_js() {
  return R"JS("use strict";
const RT = (() => {
  const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  const big = (hex) => BigInt("0x" + hex);
  function popcount(b) { let c = 0; while (b) { c += Number(b & 1n); b >>= 1n; } return c; }
  function lowest(b) { let i = 0; while (b && !(b & 1n)) { b >>= 1n; i++; } return i; }
  function ranksOf(b) { const r = []; for (let i = 0; b; i++, b >>= 1n) if (b & 1n) r.push(i); return r; }
  // A cell's color: none yet (pale grey); one rank's data in that rank's hue;
  // more contributions darker; every rank's (the result) deep navy.
  function color(hex, n) {
    if (hex === undefined) return "#eeeeee";
    const b = big(hex);
    if (b === 0n) return "#eeeeee";
    const k = popcount(b);
    if (k === n && n > 1) return "#1f3447";
    const hue = Math.round(360 * lowest(b) / Math.max(1, n));
    const light = n > 1 ? Math.round(78 - 40 * (k - 1) / (n - 1)) : 60;
    return "hsl(" + hue + ",72%," + light + "%)";
  }
  // Where each rank sits in the graph, as the algorithm sees the ranks.
  function layout(s) {
    const n = s.ranks, pos = [];
    let w = 0, h = 0;
    if (s.figure === "hosts" && s.host_of.length === n) {
      const hosts = Math.max(...s.host_of) + 1, seen = new Array(hosts).fill(0);
      for (let r = 0; r < n; r++) {
        const hh = s.host_of[r];
        pos.push({ x: 60 + hh * 110, y: 70 + seen[hh]++ * 56 });
      }
      w = 60 + hosts * 110; h = 50 + Math.max(...seen) * 56 + 30;
    } else if (s.figure === "hypercube") {
      const k = Math.max(1, Math.ceil(Math.log2(n)));
      const bitsOf = (r, odd) => { let v = 0, o = 0; for (let i = odd; i < k; i += 2, o++) v |= ((r >> i) & 1) << o; return v; };
      let cols = 0, rows = 0;
      for (let r = 0; r < n; r++) {
        const x = bitsOf(r, 0), y = bitsOf(r, 1);
        cols = Math.max(cols, x + 1); rows = Math.max(rows, y + 1);
        pos.push({ x: 50 + x * 90, y: 50 + y * 80 });
      }
      w = 50 + cols * 90; h = 50 + rows * 80;
    } else if (s.figure === "tree") {
      const adj = Array.from({ length: n }, () => new Set());
      for (const st of s.steps) for (const m of st.messages) { adj[m.from].add(m.to); adj[m.to].add(m.from); }
      const root = s.root >= 0 && s.root < n ? s.root : 0, depth = new Array(n).fill(-1), order = [root];
      depth[root] = 0;
      for (let i = 0; i < order.length; i++)
        for (const q of [...adj[order[i]]].sort((a, b) => a - b))
          if (depth[q] < 0) { depth[q] = depth[order[i]] + 1; order.push(q); }
      let deepest = 0;
      for (let r = 0; r < n; r++) if (depth[r] < 0) depth[r] = 0; else deepest = Math.max(deepest, depth[r]);
      const rows = Array.from({ length: deepest + 1 }, () => []);
      for (const r of order) rows[depth[r]].push(r);
      for (let r = 0; r < n; r++) if (!order.includes(r)) rows[0].push(r);
      const widest = Math.max(...rows.map((x) => x.length));
      w = 40 + widest * 70; h = 40 + rows.length * 80;
      for (let d = 0; d < rows.length; d++)
        rows[d].forEach((r, i) => { pos[r] = { x: w / 2 + (i - (rows[d].length - 1) / 2) * 70, y: 40 + d * 80 }; });
    } else {
      const rad = Math.max(110, n * 18);
      for (let r = 0; r < n; r++) {
        const a = -Math.PI / 2 + 2 * Math.PI * r / n;
        pos.push({ x: rad + 40 + rad * Math.cos(a), y: rad + 40 + rad * Math.sin(a) });
      }
      w = h = 2 * rad + 80;
    }
    return { pos, w, h };
  }
  const fmt = (v) => (Math.round(v * 100) / 100).toString();
  // Step k's picture: the graph with its messages, and every rank's buffer
  // after it (k = -1: before the first step).
  function svg(s, k, opts) {
    opts = opts || {};
    const n = s.ranks, L = layout(s), st = k >= 0 ? s.steps[k] : null;
    const masks = st ? st.masks : s.start.masks, values = st ? st.values : s.start.values;
    const cells = masks && masks.length === n && masks[0] && masks[0].length > 0;
    const count = cells ? Math.max(...masks.map((m) => m.length)) : 0;
    const cw = count > 0 ? Math.max(4, Math.min(26, Math.floor(520 / count))) : 0, ch = Math.max(7, Math.min(20, Math.floor(640 / n)));
    const gx = L.w + 30, labelw = 52;
    const gridw = cells ? labelw + count * cw : 180;
    const W = gx + gridw + 20, H = Math.max(L.h, 30 + n * (ch + 2) + 30);
    const out = [];
    out.push('<svg xmlns="http://www.w3.org/2000/svg" class="step" data-step="' + k + '" width="' + Math.round(W) + '" height="' + Math.round(H) +
             '" viewBox="0 0 ' + Math.round(W) + " " + Math.round(H) + '" font-family="sans-serif" font-size="11">');
    out.push('<defs><marker id="arrow' + k + '" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#c0392b"/></marker></defs>');
    if (s.figure === "hosts" && s.host_of.length === n) {
      const hosts = Math.max(...s.host_of) + 1;
      for (let hh = 0; hh < hosts; hh++) {
        const mine = L.pos.filter((_, r) => s.host_of[r] === hh), y1 = Math.min(...mine.map((p) => p.y)), y2 = Math.max(...mine.map((p) => p.y));
        out.push('<rect class="host" x="' + (mine[0].x - 40) + '" y="' + (y1 - 40) + '" width="80" height="' + (y2 - y1 + 75) +
                 '" rx="8" fill="#f4f7fb" stroke="#9ab"/><text x="' + mine[0].x + '" y="' + (y1 - 26) + '" text-anchor="middle" fill="#567">host ' + hh + "</text>");
      }
    }
    const msgs = st ? st.messages : [];
    const seen = new Map();
    msgs.forEach((m, i) => {
      const a = L.pos[m.from], b = L.pos[m.to], dx = b.x - a.x, dy = b.y - a.y, len = Math.hypot(dx, dy) || 1;
      const back = msgs.some((o) => o.from === m.to && o.to === m.from);
      const key = m.from + ">" + m.to, dup = seen.get(key) || 0;
      seen.set(key, dup + 1);
      const off = (back ? 5 : 0) + dup * 6, ox = -dy / len * off, oy = dx / len * off;
      const x1 = a.x + dx / len * 16 + ox, y1 = a.y + dy / len * 16 + oy, x2 = b.x - dx / len * 16 + ox, y2 = b.y - dy / len * 16 + oy;
      const what = m.count > 0 ? (m.in_buffer ? (m.count === 1 ? "[" + m.first + "]" : "[" + m.first + ".." + (m.first + m.count - 1) + "]")
                                               : m.count + (m.count === 1 ? " elt" : " elts"))
                               : m.bytes + " B";
      out.push('<g class="msg" data-from="' + m.from + '" data-to="' + m.to + '" data-first="' + (m.in_buffer ? m.first : -1) +
               '" data-count="' + (m.count || 0) + '" data-bytes="' + m.bytes + '"><title>rank ' + m.from + " to rank " + m.to + ": " + esc(what) + " (" + m.bytes +
               ' bytes)</title><line x1="' + fmt(x1) + '" y1="' + fmt(y1) + '" x2="' + fmt(x2) + '" y2="' + fmt(y2) +
               '" stroke="#c0392b" stroke-width="1.6" marker-end="url(#arrow' + k + ')"/>');
      if (msgs.length <= 24)
        out.push('<text x="' + fmt((x1 + x2) / 2 + ox * 1.6) + '" y="' + fmt((y1 + y2) / 2 + oy * 1.6 - 3) + '" text-anchor="middle" fill="#922">' + esc(what) + "</text>");
      out.push("</g>");
    });
    for (let r = 0; r < n; r++) {
      const p = L.pos[r];
      out.push('<g class="rank" data-rank="' + r + '"><circle cx="' + fmt(p.x) + '" cy="' + fmt(p.y) + '" r="15" fill="#fff" stroke="#234" stroke-width="1.5"/>' +
               '<text x="' + fmt(p.x) + '" y="' + fmt(p.y + 4) + '" text-anchor="middle" font-weight="bold">' + r + "</text></g>");
    }
    // the buffers, one row per rank; what a rank sends in this step is outlined
    out.push('<text x="' + gx + '" y="18" fill="#444">' + (cells ? "buffers after " + (k >= 0 ? "step " + k : "the start") : "bytes moved in this step") + "</text>");
    for (let r = 0; r < n; r++) {
      const y = 26 + r * (ch + 2);
      out.push('<text x="' + gx + '" y="' + (y + ch - 1) + '" fill="#234">rank ' + r + "</text>");
      if (cells) {
        const row = masks[r] || [];
        for (let i = 0; i < row.length; i++) {
          const who = ranksOf(big(row[i])), v = values && values[r] ? values[r][i] : "";
          out.push('<rect class="cell" data-rank="' + r + '" data-index="' + i + '" data-mask="' + row[i] + '" x="' + (gx + labelw + i * cw) + '" y="' + y +
                   '" width="' + (cw - 1) + '" height="' + ch + '" fill="' + color(row[i], n) + '"><title>rank ' + r + " [" + i + "] = " + v + ": " +
                   (who.length ? "from rank" + (who.length > 1 ? "s " : " ") + who.join(", ") : "nothing yet") + "</title></rect>");
        }
        for (const m of msgs)
          if (m.from === r && m.in_buffer && m.count > 0)
            out.push('<rect class="sent" x="' + (gx + labelw + m.first * cw - 1) + '" y="' + (y - 1) + '" width="' + (m.count * cw + 1) + '" height="' + (ch + 2) +
                     '" fill="none" stroke="#c0392b" stroke-width="1.5"/>');
      } else if (st) {
        const most = Math.max(1, ...st.sent, ...st.received);
        const bar = (v, dy, c) => '<rect x="' + (gx + labelw) + '" y="' + (y + dy) + '" width="' + fmt(120 * v / most) + '" height="' + (ch / 2 - 1) + '" fill="' + c + '"/>';
        out.push(bar(st.sent[r], 0, "#c0392b") + bar(st.received[r], ch / 2, "#2c7fb8"));
      }
    }
    out.push("</svg>");
    return out.join("");
  }
  // Every step at once (docs figures): the start, then each step, stacked.
  function strip(s) {
    const parts = [svg(s, -1)];
    for (let k = 0; k < s.steps.length; k++) parts.push(svg(s, k));
    let y = 0, W = 0;
    const body = [];
    for (let k = 0; k < parts.length; k++) {
      const m = parts[k].match(/width="(\d+)" height="(\d+)"/), w = +m[1], h = +m[2];
      body.push('<text x="4" y="' + (y + 16) + '" font-weight="bold" fill="#234">' + (k === 0 ? "start" : "step " + (k - 1)) + "</text>");
      body.push('<g transform="translate(0,' + (y + 20) + ')">' + parts[k].replace(/^<svg[^>]*>/, "").replace(/<\/svg>$/, "") + "</g>");
      y += h + 24; W = Math.max(W, w);
    }
    return '<svg xmlns="http://www.w3.org/2000/svg" width="' + W + '" height="' + y + '" viewBox="0 0 ' + W + " " + y +
           '" font-family="sans-serif" font-size="11">' + body.join("") + "</svg>\n";
  }
  // The cost model's terms of steps 0..k, summed.
  function total(s, k) {
    let a = 0, b = 0, g = 0;
    for (let i = 0; i <= k && i < s.steps.length; i++) { a += s.steps[i].alpha_us; b += s.steps[i].beta_us; g += s.steps[i].gamma_us; }
    return { alpha: a, beta: b, gamma: g, all: a + b + g };
  }
  return { svg, strip, total, color, layout };
})();
if (typeof module !== "undefined") module.exports = RT;
)JS";
}

}  // namespace ringtree

namespace ringtree::detail {

RINGTREE_FUNC std::string_view page_head() {
  return R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>ringtree: a collective step by step</title>
<style>
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #222; }
header { background: #1f3447; color: #fff; padding: 8px 14px; display: flex; gap: 14px; align-items: center; flex-wrap: wrap; }
header h1 { font-size: 16px; margin: 0; font-weight: 600; }
header select { font: inherit; }
.controls { padding: 6px 14px; background: #eef2f6; display: flex; gap: 6px; align-items: center; border-bottom: 1px solid #cfd8e0; }
.controls button { font: inherit; padding: 2px 10px; }
.controls input[type=range] { flex: 1; max-width: 480px; }
main { display: flex; align-items: flex-start; }
#view { flex: 1; overflow: auto; padding: 8px; }
aside { width: 300px; padding: 10px 14px; border-left: 1px solid #cfd8e0; background: #fafbfc; }
aside h2 { font-size: 14px; margin: 10px 0 4px; }
aside table { border-collapse: collapse; width: 100%; }
aside td { padding: 1px 4px; } aside td:last-child { text-align: right; font-variant-numeric: tabular-nums; }
.legend span { display: inline-block; width: 12px; height: 10px; margin-right: 4px; vertical-align: middle; }
.note { color: #666; font-size: 12px; }
</style></head>
<body>
<header><h1 id="title">ringtree</h1><select id="story" aria-label="which call"></select><span id="summary"></span></header>
<div class="controls">
<button id="first" title="the start (Home)">|&#9664;</button><button id="prev" title="previous step (left arrow)">&#9664;</button>
<button id="play" title="play (space)">play</button><button id="next" title="next step (right arrow)">&#9654;</button>
<button id="last" title="the last step (End)">&#9654;|</button>
<input type="range" id="slider" min="-1" value="-1" aria-label="step"><span id="stepname"></span>
</div>
<main><div id="view"></div><aside id="panel"></aside></main>
)HTML";
}

RINGTREE_FUNC std::string_view page_script() {
  return R"JS(
const stories = JSON.parse(document.getElementById("stories").textContent);
const $ = (id) => document.getElementById(id);
let si = 0, k = -1, timer = null;
stories.forEach((s, i) => { const o = document.createElement("option"); o.value = i; o.textContent = s.title || (s.collective + ", " + s.algorithm + ", " + s.ranks + " ranks"); $("story").appendChild(o); });
const us = (v) => (v === 0 ? "0 us" : v < 0.01 ? v.toPrecision(2) + " us" : v < 1000 ? v.toFixed(2) + " us" : (v / 1000).toFixed(3) + " ms");
const first = (j) => ((1n << BigInt(j)) - 1n).toString(16);  // the mask of ranks 0..j-1
function show() {
  const s = stories[si], last = s.steps.length - 1;
  k = Math.max(-1, Math.min(k, last));
  $("title").textContent = s.collective + " \u00b7 " + s.algorithm + " \u00b7 " + s.ranks + " ranks";
  $("summary").textContent = s.count + " element" + (s.count === 1 ? "" : "s") + " per rank" + (s.note ? " \u00b7 " + s.note : "");
  $("slider").max = last; $("slider").value = k;
  $("stepname").textContent = k < 0 ? "start (" + (last + 1) + " steps)" : "step " + k + " of " + (last + 1);
  $("view").innerHTML = RT.svg(s, k);
  document.body.dataset.step = k;
  const st = k >= 0 ? s.steps[k] : null, t = RT.total(s, k), all = RT.total(s, last);
  const row = (a, b) => "<tr><td>" + a + "</td><td>" + b + "</td></tr>";
  $("panel").innerHTML =
    "<h2>" + (st ? "Step " + k : "Before the first step") + "</h2>" +
    (st ? "<p>" + st.messages.length + " message" + (st.messages.length === 1 ? "" : "s") + "</p><table>" +
          row("alpha (a step)", us(st.alpha_us)) + row("beta (most bytes a rank moved)", us(st.beta_us)) +
          row("gamma (most bytes a rank reduced)", us(st.gamma_us)) + "</table>" : "<p>Every rank holds its own input.</p>") +
    "<h2>Running total (steps 0.." + Math.max(k, 0) + ")</h2><table>" + row("alpha", us(t.alpha)) + row("beta", us(t.beta)) +
    row("gamma", us(t.gamma)) + row("<b>all</b>", "<b>" + us(k < 0 ? 0 : t.all) + "</b>") + "</table>" +
    "<h2>Whole call</h2><table>" + row("steps", last + 1) + row("predicted", us(all.all)) + "</table>" +
    "<p class=note>Model: alpha " + s.model.alpha_us + " us, beta " + s.model.beta_ns_per_byte + " ns/B, gamma " + s.model.gamma_ns_per_byte +
    " ns/B (" + s.model.source + "); time = alpha * steps + beta * bytes + gamma * reduced (docs/algorithms.md).</p>" +
    "<h2>Colors</h2><p class=\"legend note\"><span style=\"background:#eeeeee\"></span>nothing yet " +
    "<span style=\"background:" + RT.color(first(1), s.ranks) + "\"></span>one rank's data (its hue) " +
    "<span style=\"background:" + RT.color(first(Math.max(1, s.ranks - 1)), s.ranks) + "\"></span>more ranks' (darker) " +
    "<span style=\"background:" + RT.color(first(s.ranks), s.ranks) + "\"></span>every rank's: done. " +
    "Outlined cells are what a rank sends in this step; hover a cell or an arrow for details.</p>";
  const want = "#step=" + k + (si ? "&story=" + si : "");
  if (location.hash !== want) history.replaceState(null, "", want);
}
function fromHash() {
  const m = /step=(-?\d+)/.exec(location.hash), n = /story=(\d+)/.exec(location.hash);
  if (n) si = Math.min(stories.length - 1, +n[1]);
  $("story").value = si;
  k = m ? +m[1] : -1;
  show();
}
function stop() { if (timer) { clearInterval(timer); timer = null; $("play").textContent = "play"; } }
$("first").onclick = () => { stop(); k = -1; show(); };
$("prev").onclick = () => { stop(); k--; show(); };
$("next").onclick = () => { stop(); k++; show(); };
$("last").onclick = () => { stop(); k = stories[si].steps.length - 1; show(); };
$("slider").oninput = (e) => { stop(); k = +e.target.value; show(); };
$("story").onchange = (e) => { stop(); si = +e.target.value; k = -1; show(); };
$("play").onclick = () => {
  if (timer) return stop();
  if (k >= stories[si].steps.length - 1) k = -1;
  $("play").textContent = "pause";
  timer = setInterval(() => { if (k >= stories[si].steps.length - 1) return stop(); k++; show(); }, 900);
};
document.addEventListener("keydown", (e) => {
  if (e.key === "ArrowRight") $("next").onclick(); else if (e.key === "ArrowLeft") $("prev").onclick();
  else if (e.key === "Home") $("first").onclick(); else if (e.key === "End") $("last").onclick();
  else if (e.key === " ") { e.preventDefault(); $("play").onclick(); }
});
window.addEventListener("hashchange", fromHash);
fromHash();
)JS";
}

}  // namespace ringtree::detail

namespace ringtree {

RINGTREE_FUNC void write_html(std::ostream& os, const std::vector<trace_story>& stories) {
  os << detail::page_head() << "<script id=\"stories\" type=\"application/json\">[";
  for (std::size_t i = 0; i < stories.size(); ++i) {
    if (i) os << ",";
    write_json(os, stories[i]);
  }
  os << "]</script>\n<script id=\"renderer\">\n" << renderer_js() << "</script>\n<script>" << detail::page_script()
     << "</script>\n</body></html>\n";
}

}  // namespace ringtree
