// callbench report viewer: filters, sort and search on the episodes table; links that open what
// they point to. Plain DOM, no library; text goes in through textContent only.
(function () {
  "use strict";
  var table = document.getElementById("episode-table");
  var rows = table ? Array.prototype.slice.call(table.tBodies[0].rows) : [];
  var textCache = {};

  function openAncestors(el) {
    for (var p = el; p; p = p.parentElement) {
      if (p.classList && p.classList.contains("filtered-out")) { p.classList.remove("filtered-out"); }
      if (p.tagName === "DETAILS") { p.open = true; }
    }
  }

  // Operating instructions stored as line edits from a base: rebuild the full text on open.
  function buildFull(block) {
    var ops = document.getElementById(block.id + "-ops");
    var out = block.querySelector(".full");
    if (!ops || !out || out.getAttribute("data-built")) { return; }
    var base = document.getElementById(block.getAttribute("data-base") + "-text");
    if (!base) { return; }
    var lines = base.textContent.split("\n"), edits = JSON.parse(ops.textContent), pos = 0;
    function plain(a, b) { if (b > a) { out.appendChild(document.createTextNode(lines.slice(a, b).join("\n") + "\n")); } }
    edits.forEach(function (e) {
      plain(pos, e[0]);
      if (e[2].length) {
        var m = document.createElement("mark");
        m.textContent = e[2].join("\n") + "\n";
        out.appendChild(m);
      }
      pos = e[1];
    });
    plain(pos, lines.length);
    out.setAttribute("data-built", "1");
  }

  function reveal(id) {
    var el = id && document.getElementById(id);
    if (!el) { return false; }
    openAncestors(el);
    if (el.classList.contains("derived")) { buildFull(el); }
    el.scrollIntoView({block: "start"});
    return true;
  }

  document.addEventListener("click", function (ev) {
    var a = ev.target.closest ? ev.target.closest("a") : null;
    var href = a && (a.getAttribute("href") || a.getAttribute("xlink:href"));
    if (!href || href.charAt(0) !== "#") { return; }
    var id = decodeURIComponent(href.slice(1));
    if (!document.getElementById(id)) { return; }
    ev.preventDefault();
    reveal(id);
    if (location.hash !== "#" + id) { location.hash = id; }
  });
  window.addEventListener("hashchange", function () { reveal(decodeURIComponent(location.hash.slice(1))); });
  document.addEventListener("toggle", function (ev) {
    if (ev.target.classList && ev.target.classList.contains("derived") && ev.target.open) { buildFull(ev.target); }
  }, true);

  function episodeText(row) {
    var id = row.getAttribute("data-target");
    if (!(id in textCache)) {
      var el = document.getElementById(id);
      textCache[id] = el ? el.textContent.toLowerCase() : "";
    }
    return textCache[id];
  }

  function apply() {
    var selects = document.querySelectorAll("select[data-facet]");
    var query = (document.getElementById("episode-search") || {value: ""}).value.trim().toLowerCase();
    var shown = 0;
    rows.forEach(function (row) {
      var ok = true;
      for (var i = 0; i < selects.length && ok; i++) {
        var v = selects[i].value;
        ok = v === "" || row.getAttribute("data-" + selects[i].getAttribute("data-facet")) === v;
      }
      if (ok && query) { ok = episodeText(row).indexOf(query) >= 0; }
      row.hidden = !ok;
      var target = document.getElementById(row.getAttribute("data-target"));
      if (target) { target.classList.toggle("filtered-out", !ok); }
      if (ok) { shown++; }
    });
    var count = document.getElementById("episode-count");
    if (count) { count.textContent = shown + " of " + rows.length + " episodes shown"; }
  }

  Array.prototype.forEach.call(document.querySelectorAll("select[data-facet]"), function (s) {
    s.addEventListener("change", apply);
  });
  var search = document.getElementById("episode-search");
  if (search) { search.addEventListener("input", apply); }
  var reset = document.getElementById("episode-reset");
  if (reset) {
    reset.addEventListener("click", function () {
      Array.prototype.forEach.call(document.querySelectorAll("select[data-facet]"), function (s) { s.value = ""; });
      if (search) { search.value = ""; }
      apply();
    });
  }

  // Sort by any column: numbers by data-v, text by its content; a second click reverses.
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (t) {
    var heads = t.tHead ? t.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(heads, function (th, col) {
      var button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      button.textContent = th.textContent;
      th.textContent = "";
      th.appendChild(button);
      button.addEventListener("click", function () {
        var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
        var body = t.tBodies[0];
        var list = Array.prototype.slice.call(body.rows);
        var numeric = th.getAttribute("data-type") === "num";
        list.sort(function (a, b) {
          var x = a.cells[col], y = b.cells[col];
          var vx = x.hasAttribute("data-v") ? x.getAttribute("data-v") : x.textContent;
          var vy = y.hasAttribute("data-v") ? y.getAttribute("data-v") : y.textContent;
          if (numeric) {
            var nx = vx === "" ? -Infinity : parseFloat(vx), ny = vy === "" ? -Infinity : parseFloat(vy);
            return dir * (nx - ny);
          }
          return dir * vx.localeCompare(vy);
        });
        list.forEach(function (r) { body.appendChild(r); });
      });
    });
  });

  apply();
  if (location.hash) { reveal(decodeURIComponent(location.hash.slice(1))); }
})();
