// callbench report viewer: filters, sort and search on the episodes table; links that open what
// they point to. Plain DOM, no library; text goes in through textContent only (never innerHTML).
// Folder report (body[data-calls]): a call's data is loaded from calls/e<n>.js when it is opened and
// its details element built by templates/call_view.js (embedded in the folder's page only), and the
// search text from search/s<k>.js on the first search, by adding script elements (fetch() of
// file:// is blocked; a script beside the page is not).
(function () {
  "use strict";
  var table = document.getElementById("episode-table");
  var rows = table ? Array.prototype.slice.call(table.tBodies[0].rows) : [];
  var textCache = {};
  var callsDir = document.body.getAttribute("data-calls");
  var searchDir = document.body.getAttribute("data-search");
  var shardCount = parseInt(document.body.getAttribute("data-search-shards") || "0", 10);
  var pending = {}, shardsLoaded = -1;

  function addScript(src, onerror) {
    var s = document.createElement("script");
    s.src = src;
    s.onerror = onerror;
    document.head.appendChild(s);
  }

  function loadNote(text) {
    var note = document.getElementById("load-problem");
    if (!note) {
      note = document.createElement("p");
      note.id = "load-problem";
      note.className = "bad";
      document.getElementById("calls").appendChild(note);
    }
    note.textContent = text;
  }

  // Folder report: the call file calls back with the call's data (callbench/report/html/call_script.py).
  window.callbenchCall = function (anchor, call) {
    var box = document.getElementById("calls");
    if (!box || document.getElementById(anchor)) { return; }
    var el = window.callbenchBuildCall(call);
    var row = table && table.querySelector("tr[data-target='" + anchor + "']");
    if (row && row.hidden) { el.classList.add("filtered-out"); }
    box.appendChild(el);
    (pending[anchor] || []).forEach(function (f) { f(); });
    delete pending[anchor];
  };


  // Run then() once the element with id `id` exists, loading its call's file when it is a call's.
  function whenPresent(id, then) {
    if (!id || document.getElementById(id)) { then(); return; }
    var m = callsDir && /^(e\d+)(?:-[mt]\d+)?$/.exec(id);
    if (!m) { then(); return; }
    var anchor = m[1];
    if (pending[anchor]) { pending[anchor].push(then); return; }
    pending[anchor] = [then];
    addScript(callsDir + anchor + ".js", function () {
      delete pending[anchor];
      loadNote("Cannot read " + callsDir + anchor + ".js beside this page: keep the report folder whole.");
    });
  }

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
    if (!document.getElementById(id) && !(callsDir && /^e\d+/.test(id))) { return; }
    ev.preventDefault();
    whenPresent(id, function () {
      reveal(id);
      if (location.hash !== "#" + id) { location.hash = id; }
    });
  });
  window.addEventListener("hashchange", function () {
    var id = decodeURIComponent(location.hash.slice(1));
    whenPresent(id, function () { reveal(id); });
  });
  document.addEventListener("toggle", function (ev) {
    if (ev.target.classList && ev.target.classList.contains("derived") && ev.target.open) { buildFull(ev.target); }
  }, true);

  // Folder report: each search file calls back with {anchor: text} for its calls.
  window.callbenchSearch = function (k, texts) {
    Object.keys(texts).forEach(function (id) { textCache[id] = texts[id].toLowerCase(); });
    shardDone();
  };

  function shardDone() {
    shardsLoaded++;
    if (shardsLoaded === shardCount) { apply(); } else { countNote(); }
  }

  function loadSearch() {
    if (shardsLoaded >= 0) { return; }
    shardsLoaded = 0;
    for (var k = 0; k < shardCount; k++) {
      addScript(searchDir + "s" + k + ".js", function (ev) {
        loadNote("Cannot read " + ev.target.getAttribute("src") + " beside this page: search misses its calls.");
        shardDone();
      });
    }
  }

  function countNote() {
    var count = document.getElementById("episode-count");
    if (count && shardsLoaded >= 0 && shardsLoaded < shardCount) {
      count.textContent = "loading the calls' text for search (" + shardsLoaded + " of " + shardCount + " files)";
    }
  }

  function episodeText(id) {
    if (!(id in textCache)) {
      var el = document.getElementById(id);
      textCache[id] = el ? el.textContent.toLowerCase() : "";
    }
    return textCache[id];
  }

  // Folder report: the table's rows come as data ([anchor, candidate, agent, scenario, repeat,
  // language, difficulty, status, end reason, tool calls, overall, verdict]) and only the first
  // PAGE matching rows are in the table at a time ("show more" lists more).
  var rowData = document.getElementById("episode-rows");
  var data = rowData ? JSON.parse(rowData.textContent) : null;
  var FIELD = {candidate: 1, agent: 2, language: 5, difficulty: 6, end: 8, verdict: 11};
  var NAMES = ["target", "candidate", "agent", "scenario", "repeat", "language", "difficulty", "status", "end"];
  var PAGE = 200, listed = PAGE, matched = [];

  function cell(tr, text, v, cls) {
    var td = document.createElement("td");
    td.textContent = text;
    if (v !== undefined) { td.setAttribute("data-v", v); td.className = "num"; }
    if (cls) { td.className = cls; }
    tr.appendChild(td);
    return td;
  }

  function rowElement(d) {
    var tr = document.createElement("tr");
    NAMES.forEach(function (n, i) { if (i !== 3 && i !== 4 && i !== 7) { tr.setAttribute("data-" + n, d[i]); } });
    tr.setAttribute("data-verdict", d[11]);
    cell(tr, d[1]); cell(tr, d[2]);
    var a = document.createElement("a");
    a.href = "#" + d[0];
    a.textContent = d[3];
    cell(tr, "").appendChild(a);
    cell(tr, String(d[4]), d[4]); cell(tr, d[5]); cell(tr, d[6]); cell(tr, d[7]); cell(tr, d[8]);
    cell(tr, String(d[9]), d[9]);
    cell(tr, d[10] === null ? "\u2014" : d[10].toFixed(1), d[10] === null ? "" : d[10]);
    cell(tr, d[11] === "none" ? "\u2014" : d[11], undefined, "verdict-" + d[11]);
    return tr;
  }

  function listRows() {
    var body = table.tBodies[0], frag = document.createDocumentFragment();
    matched.slice(0, listed).forEach(function (d) { frag.appendChild(rowElement(d)); });
    body.textContent = "";
    body.appendChild(frag);
    var more = document.getElementById("episode-more"), rest = matched.length - listed;
    if (more) {
      more.hidden = rest <= 0;
      more.textContent = "list " + Math.min(rest, PAGE) + " more (" + rest + " not listed)";
    }
    var count = document.getElementById("episode-count");
    count.textContent = matched.length + " of " + data.length + " episodes shown" +
      (rest > 0 ? " (the first " + listed + " listed)" : "");
  }

  function applyData(selects, query) {
    matched = data.filter(function (d) {
      for (var i = 0; i < selects.length; i++) {
        var v = selects[i].value;
        if (v !== "" && String(d[FIELD[selects[i].getAttribute("data-facet")]]) !== v) { return false; }
      }
      return !query || episodeText(d[0]).indexOf(query) >= 0;
    });
    var ok = {};
    matched.forEach(function (d) { ok[d[0]] = true; });
    Array.prototype.forEach.call(document.querySelectorAll("#calls > details.episode"), function (el) {
      el.classList.toggle("filtered-out", !ok[el.id]);
    });
    listed = PAGE;
    listRows();
  }

  function apply() {
    var selects = document.querySelectorAll("select[data-facet]");
    var query = (document.getElementById("episode-search") || {value: ""}).value.trim().toLowerCase();
    var shown = 0;
    if (query && callsDir && shardsLoaded < shardCount) { loadSearch(); countNote(); return; }
    if (data) { applyData(selects, query); return; }
    rows.forEach(function (row) {
      var ok = true;
      for (var i = 0; i < selects.length && ok; i++) {
        var v = selects[i].value;
        ok = v === "" || row.getAttribute("data-" + selects[i].getAttribute("data-facet")) === v;
      }
      if (ok && query) { ok = episodeText(row.getAttribute("data-target")).indexOf(query) >= 0; }
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
  var moreButton = document.getElementById("episode-more");
  if (moreButton) { moreButton.addEventListener("click", function () { listed += PAGE; listRows(); }); }
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
        if (data && t === table) {
          var key = function (d) { var x = d[col + 1]; return x === null ? -Infinity : x; };
          var order = function (a, b) {
            var x = key(a), y = key(b);
            return dir * (numeric ? x - y : String(x).localeCompare(String(y)));
          };
          data.sort(order);
          matched.sort(order);
          listRows();
          return;
        }
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
  if (location.hash) {
    var first = decodeURIComponent(location.hash.slice(1));
    whenPresent(first, function () { reveal(first); });
  }
})();
