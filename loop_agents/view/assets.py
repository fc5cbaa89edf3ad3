"""The viewer's inline CSS and JavaScript (no CDN, no external files: pages work from file://).

The script never uses innerHTML: model output reaches the DOM only as textContent.
"""

CSS = """
:root { --ok: #1a7f37; --bad: #cf222e; --muted: #57606a; --line: #d0d7de; --bg2: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, sans-serif; margin: 0; padding: 12px 20px; color: #1f2328; }
a { color: #0969da; text-decoration: none; } a:hover { text-decoration: underline; }
h1 { font-size: 20px; margin: 4px 0 12px; } h2 { font-size: 17px; margin: 20px 0 8px; }
h3 { font-size: 15px; margin: 0 0 6px; }
nav.crumbs { color: var(--muted); margin-bottom: 6px; }
table { border-collapse: collapse; margin: 6px 0 14px; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: right; white-space: nowrap; }
th { background: var(--bg2); } td.l, th.l { text-align: left; }
.scroll { overflow-x: auto; max-width: 100%; }
pre { background: var(--bg2); border: 1px solid var(--line); border-radius: 4px; padding: 6px 8px;
      margin: 4px 0; white-space: pre-wrap; word-break: break-word; max-height: 420px; overflow: auto; }
pre.code { background: #fff8e6; } pre.obs { background: #eef6ff; }
.ok { color: var(--ok); } .bad { color: var(--bad); } .muted { color: var(--muted); }
.badge { display: inline-block; border: 1px solid var(--line); border-radius: 10px; padding: 0 7px;
         margin: 1px 2px; font-size: 12px; background: #fff; }
.badge.dropped { background: #ffebe9; } .badge.kept { background: #dafbe1; }
.badge.warn { background: #fff8c5; }
#filters { position: sticky; top: 0; background: #fff; border-bottom: 1px solid var(--line);
           padding: 8px 0; z-index: 2; display: flex; flex-wrap: wrap; gap: 10px; align-items: center; }
#filters input[type=text] { width: 16em; } #filters input[type=number] { width: 6em; }
section.group { border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; margin: 10px 0; }
.cards { display: flex; gap: 8px; overflow-x: auto; }
.card { flex: 0 0 210px; border: 1px solid var(--line); border-radius: 6px; padding: 6px 8px;
        color: inherit; background: #fff; }
.card.success { border-left: 4px solid var(--ok); } .card.failure { border-left: 4px solid var(--bad); }
.card .reward { font-size: 18px; font-weight: 600; }
.grid { display: grid; gap: 8px; align-items: start; overflow-x: auto; }
.cell { border: 1px solid var(--line); border-radius: 6px; padding: 6px 8px; min-width: 0; }
.cell.empty { border-style: dashed; background: var(--bg2); }
.turnhead { font-size: 12px; color: var(--muted); }
ul.tests { list-style: none; padding-left: 0; margin: 4px 0; } ul.tests li { margin: 2px 0; }
.tokview { font: 12px/1.6 ui-monospace, monospace; white-space: pre-wrap; word-break: break-all;
           max-height: 520px; overflow: auto; border: 1px solid var(--line); padding: 6px; }
.tok { border-radius: 2px; } .tok.ctx { color: #8c959f; }
.tok.gen { border-bottom: 2px solid var(--ok); }
.legend span { margin-right: 10px; }
svg.chart { border: 1px solid var(--line); background: #fff; margin: 4px 8px 4px 0; }
.charts { display: flex; flex-wrap: wrap; }
#js-error { display: none; background: #ffebe9; border: 1px solid var(--bad); padding: 6px; }
"""

JS = r"""
"use strict";
window.addEventListener("error", function (e) {
  var box = document.getElementById("js-error");
  if (box) { box.style.display = "block"; box.textContent = "viewer script error: " + e.message; }
});

function readFilters() {
  var get = function (id) { var el = document.getElementById(id); return el ? el.value : ""; };
  return { task: get("f-task").trim().toLowerCase(), rmin: get("f-rmin"), rmax: get("f-rmax"),
           finish: get("f-finish"), kept: get("f-kept"), success: get("f-success") };
}

function cardMatches(card, f) {
  var reward = parseFloat(card.dataset.reward);
  if (f.rmin !== "" && !(reward >= parseFloat(f.rmin))) return false;
  if (f.rmax !== "" && !(reward <= parseFloat(f.rmax))) return false;
  if (f.finish !== "" && card.dataset.finish !== f.finish) return false;
  if (f.kept !== "" && card.dataset.filtered !== f.kept) return false;
  if (f.success !== "" && card.dataset.success !== f.success) return false;
  return true;
}

function applyFilters() {
  var f = readFilters();
  var groups = document.querySelectorAll("section.group");
  var shownGroups = 0, shownCards = 0, totalCards = 0;
  groups.forEach(function (group) {
    var taskOk = f.task === "" || group.dataset.search.indexOf(f.task) !== -1;
    var any = false;
    group.querySelectorAll(".card").forEach(function (card) {
      totalCards += 1;
      var ok = taskOk && cardMatches(card, f);
      card.hidden = !ok;
      if (ok) { any = true; shownCards += 1; }
    });
    group.hidden = !any;
    if (any) shownGroups += 1;
  });
  var count = document.getElementById("f-count");
  if (count) {
    count.textContent = shownGroups + " of " + groups.length + " groups, " +
      shownCards + " of " + totalCards + " episodes shown";
  }
  writeHash(f);
}

function writeHash(f) {
  var parts = [];
  Object.keys(f).forEach(function (k) { if (f[k] !== "") parts.push(k + "=" + encodeURIComponent(f[k])); });
  var hash = parts.length ? "#" + parts.join("&") : "";
  if (location.hash === hash) return;
  try { history.replaceState(null, "", hash || location.pathname + location.search); } catch (err) {
    // some browsers refuse replaceState on file:// pages; the filters still work without the hash
  }
}

function readHash() {
  var ids = { task: "f-task", rmin: "f-rmin", rmax: "f-rmax", finish: "f-finish", kept: "f-kept",
              success: "f-success" };
  location.hash.replace(/^#/, "").split("&").forEach(function (part) {
    var i = part.indexOf("=");
    if (i < 0) return;
    var key = part.slice(0, i), el = document.getElementById(ids[key] || "");
    if (el) el.value = decodeURIComponent(part.slice(i + 1));
  });
}

function renderTokens(details) {
  if (details.dataset.rendered) return;
  details.dataset.rendered = "1";
  var data = JSON.parse(document.getElementById(details.dataset.src).textContent);
  var box = details.querySelector(".tokview");
  var frag = document.createDocumentFragment();
  for (var i = 0; i < data.id.length; i++) {
    var span = document.createElement("span");
    span.textContent = data.text[i];
    if (data.mask[i]) {
      var p = Math.exp(data.lp[i]);
      span.className = "tok gen";
      span.style.backgroundColor = "rgba(207, 34, 46, " + (0.85 * (1 - p)).toFixed(3) + ")";
      span.title = "#" + i + " id " + data.id[i] + " | trained | logprob " + data.lp[i] + " | p " + p.toFixed(3);
    } else {
      span.className = "tok ctx";
      span.title = "#" + i + " id " + data.id[i] + " | context (loss mask 0)";
    }
    frag.appendChild(span);
  }
  box.appendChild(frag);
}

document.addEventListener("DOMContentLoaded", function () {
  if (document.getElementById("filters")) {
    readHash();
    document.querySelectorAll("#filters input, #filters select").forEach(function (el) {
      el.addEventListener("input", applyFilters);
      el.addEventListener("change", applyFilters);
    });
    var reset = document.getElementById("f-reset");
    if (reset) reset.addEventListener("click", function () {
      document.querySelectorAll("#filters input, #filters select").forEach(function (el) { el.value = ""; });
      applyFilters();
    });
    applyFilters();
  }
  document.querySelectorAll("details.tokens").forEach(function (d) {
    if (location.hash === "#tokens") d.open = true;  // a link that opens every token view
    d.addEventListener("toggle", function () { if (d.open) renderTokens(d); });
    if (d.open) renderTokens(d);
  });
});
"""
