// callbench folder report: one call's details.episode element built from its data
// (callbench/report/html/call_script.py), the same DOM templates/episode.html.j2 gives the single file:
// same elements, attributes in the same order, the same text and the same white space between
// elements (tests/report/test_browser_equivalence.py). DOM calls only (createElement,
// createTextNode, setAttribute): trace text is never parsed as markup. Embedded in the folder
// report's page head; templates/report.js calls window.callbenchBuildCall(data) for each call file.
(function () {
  "use strict";

  // Text as the HTML parser holds it when the single file's markup carries it: CR LF and CR read
  // as LF (input stream preprocessing), NUL dropped in text and made U+FFFD in attribute values
  // (HTML Living Standard, tree construction "in body" and attribute value states).
  function txt(x) { return x === null || x === undefined ? "" : String(x).replace(/\r\n?/g, "\n").replace(/\0/g, ""); }
  function att(x) { return x === null || x === undefined ? "" : String(x).replace(/\r\n?/g, "\n").replace(/\0/g, "\ufffd"); }

  function add(parent, c) {
    if (c === null || c === undefined) { return; }
    if (typeof c === "object") { parent.appendChild(c); return; }
    var t = txt(c);
    if (t !== "") { parent.appendChild(document.createTextNode(t)); }
  }

  // h(parent, tag, attrs, child...): an element with attributes (in order) and children (text or nodes).
  function h(parent, tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) { Object.keys(attrs).forEach(function (k) { el.setAttribute(k, att(attrs[k])); }); }
    for (var i = 3; i < arguments.length; i++) { add(el, arguments[i]); }
    if (parent) { parent.appendChild(el); }
    return el;
  }

  // Python's json.dumps(indent=1) text from its compact text (", " and ": " separators): the
  // tokens are copied, never parsed, so numbers print exactly as Python printed them.
  function indentJSON(s) {
    var out = "", depth = 0, i = 0, n = s.length, c, j;
    function nl() { return "\n" + " ".repeat(depth); }
    while (i < n) {
      c = s.charAt(i);
      if (c === "\"") {
        j = i + 1;
        while (j < n && s.charAt(j) !== "\"") { j += s.charAt(j) === "\\" ? 2 : 1; }
        out += s.slice(i, j + 1);
        i = j + 1;
      } else if (c === "{" || c === "[") {
        if (s.charAt(i + 1) === (c === "{" ? "}" : "]")) { out += s.substr(i, 2); i += 2; continue; }
        depth++;
        out += c + nl();
        i++;
      } else if (c === "}" || c === "]") {
        depth--;
        out += nl() + c;
        i++;
      } else if (c === ",") {
        out += "," + nl();
        i += 2;
      } else {
        j = i;
        while (j < n && "\"{}[],".indexOf(s.charAt(j)) < 0) { j++; }
        out += s.slice(i, j);
        i = j;
      }
    }
    return out;
  }

  // A value held for display (callbench/report/html/call_script.py: json_source): [compact JSON] or text.
  function shown(x) { return x !== null && typeof x === "object" ? indentJSON(x[0]) : x; }

  // A <pre>: the parser drops one line feed right after its start tag.
  function pre(parent, lang, x) {
    var s = x === null || x === undefined ? "" : String(x).replace(/\r\n?/g, "\n");
    return h(parent, "pre", {"class": "json", lang: lang}, s.charAt(0) === "\n" ? s.slice(1) : s);
  }

  function links(parent, pairs) {
    pairs.forEach(function (p, i) {
      if (p[1]) { h(parent, "a", {href: "#" + p[1]}, String(p[0])); } else { add(parent, p[0] + "?"); }
      if (i < pairs.length - 1) { add(parent, ", "); }
    });
  }

  // <div class="scroll"><table class="wide"> with its heading row; returns the (implied) tbody.
  function wideTable(parent, heads) {
    var scroll = h(parent, "div", {"class": "scroll"}, "\n");
    var table = h(scroll, "table", {"class": "wide"}, "\n");
    add(scroll, "\n");
    add(parent, "\n");
    var body = h(table, "tbody");
    var tr = h(body, "tr");
    heads.forEach(function (x) { h(tr, "th", null, x); });
    add(body, "\n");
    return body;
  }

  function section(d, title, heads) {
    h(d, "h4", null, title);
    add(d, "\n");
    return heads;
  }

  function messageRow(body, e, m) {
    var tr = h(body, "tr", {"class": "role-" + m.role, id: e.anchor + "-m" + m.index});
    h(tr, "td", {"class": "num"}, String(m.index));
    h(tr, "td", null, m.role);
    add(tr, "\n");
    var td = h(tr, "td");
    if (m.instructions) { h(td, "a", {href: "#" + m.instructions}, m.content); }
    else if (m.json) { pre(td, e.language, shown(m.content)); }
    else { h(td, "div", {"class": "text", lang: e.language}, m.content); }
    if (m.error) { h(td, "div", {"class": "bad"}, "error: " + m.error); }
    add(tr, "\n");
    td = h(tr, "td");
    (m.tool_calls || []).forEach(function (c) {
      var div = h(td, "div", null, h(null, "b", null, c.name), " ", h(null, "span", {"class": "ci"}, c.id));
      pre(div, e.language, shown(c.arguments));
    });
    add(tr, "\n");
    td = h(tr, "td");
    if (m.caller_turn != null) {
      add(td, "caller turn " + m.caller_turn + (m.fragment != null ? ", fragment " + m.fragment : ""));
    }
    if (m.tool_event_index != null) { h(td, "a", {href: "#" + e.anchor + "-t" + m.tool_event_index}, "tool event " + m.tool_event_index); }
    if (m.candidate_turn != null) { add(td, " candidate turn " + m.candidate_turn); }
    if (m.tool_call_id) { add(td, " "); h(td, "span", {"class": "ci"}, m.tool_call_id); }
    add(body, "\n");
  }

  function eventRow(body, e, t) {
    var tr = h(body, "tr", {id: e.anchor + "-t" + t.index});
    h(tr, "td", {"class": "num"}, String(t.index));
    var td = h(tr, "td", null, h(null, "b", null, t.name));
    if (!t.known_tool) { add(td, " "); h(td, "span", {"class": "bad"}, "unknown tool"); }
    h(td, "br");
    h(td, "span", {"class": "ci"}, "turn " + txt(t.candidate_turn) + ", queue " + txt(t.queue_position) + ", ",
      h(null, "a", {href: "#" + e.anchor + "-m" + t.message_index}, "call msg " + t.message_index), ", ",
      h(null, "a", {href: "#" + e.anchor + "-m" + t.result_message_index}, "result msg " + t.result_message_index));
    add(tr, "\n");
    td = h(tr, "td");
    pre(td, e.language, shown(t.arguments));
    if (t.parse_error) { h(td, "div", {"class": "bad"}, "parse error: " + t.parse_error); }
    (t.schema_errors || []).forEach(function (s) { h(td, "div", {"class": "bad"}, "outside the schema: " + s); });
    if (t.double_encoded) { h(td, "div", {"class": "warn"}, "double-encoded arguments"); }
    add(tr, "\n");
    td = h(tr, "td", null, t.outcome);
    if (!t.executed) { add(td, " "); h(td, "span", {"class": "warn"}, "(not sent to the backend)"); }
    add(tr, "\n");
    td = h(tr, "td");
    (t.matchers || []).forEach(function (r) { h(td, "div", {"class": r.ok ? "good" : "bad"}, txt(r.field) + ": " + txt(r.reason)); });
    (t.state_changes || []).forEach(function (c) { h(td, "div", {"class": "ci"}, c); });
    add(tr, "\n");
    pre(h(tr, "td"), e.language, shown(t.result));
    add(tr, "\n");
    td = h(tr, "td");
    if (t.call_ending) {
      add(td, "call-ending; condition " + (t.success_condition_met ? "met" : "not met") + (t.ended_call ? "; ended the call" : ""));
    }
    add(body, "\n");
  }

  function segments(parent, segs, mark) {
    segs.forEach(function (s) { if (s[1]) { h(parent, mark, {"class": "w"}, s[0]); } else { add(parent, s[0]); } });
  }

  function turnRow(body, e, t) {
    var tr = h(body, "tr");
    h(tr, "td", {"class": "num"}, t.index + (t.done ? " (done)" : ""));
    var td = h(tr, "td");
    segments(h(td, "div", {"class": "text", lang: e.language}), t.diff[0], "del");
    if (t.rejections) { h(td, "div", {"class": "warn"}, t.attempts + " attempts; rejected: " + txt(t.rejections)); }
    // the turn's audio, as the line delivered it then clean: files beside the call files
    // (call_file.py), or why there is none
    (t.audio || []).forEach(function (a) {
      var box = h(td, "div", {"class": "audio"});
      h(box, "div", {"class": "ci"}, a.label);
      if (a.src) { h(box, "audio", {controls: "", preload: "none", src: a.src}); }
      else if (a.note) { h(box, "div", {"class": "ci"}, a.note); }
    });
    add(tr, "\n");
    td = h(tr, "td");
    t.diff[1].forEach(function (frag) { segments(h(td, "div", {"class": "text", lang: e.language}), frag, "ins"); });
    add(tr, "\n");
    h(tr, "td", null, t.expressed_steps);
    add(tr, "\n");
    td = h(tr, "td");
    t.channel_events.forEach(function (ev) {
      var div = h(td, "div", null, txt(ev.kind) + " (" + txt(ev.source) + (ev.applied ? ", applied" : ", not applied") + ")");
      if (ev.span) { add(div, ": \u201c"); h(div, "span", {lang: e.language}, ev.span); add(div, "\u201d"); }
      if (ev.replacement !== null) { add(div, " \u2192 \u201c"); h(div, "span", {lang: e.language}, ev.replacement); add(div, "\u201d"); }
      if (ev.detail) { add(div, " "); h(div, "span", {"class": "ci", lang: e.language}, ev.detail); }
    });
    add(tr, "\n");
    links(h(tr, "td"), t.messages);
    add(body, "\n");
  }

  function judgedRow(body, it) {
    var tr = h(body, "tr");
    h(tr, "td", null, it.id + " ", h(null, "span", {"class": "ci"}, it.source));
    h(tr, "td", null, it.pillar);
    h(tr, "td", null, it.diagnostic);
    h(tr, "td", {"class": "num"}, it.weight);
    add(tr, "\n");
    h(tr, "td", null, it.label);
    h(tr, "td", {"class": "num"}, it.r);
    h(tr, "td", null, h(null, "div", {"class": "text"}, it.reason));
    add(tr, "\n");
    links(h(tr, "td"), it.messages);
    links(h(tr, "td"), it.events);
    add(body, "\n");
  }

  // The latency strip's row (callbench/report/html/latency_strip.py gives every value as text).
  function latencyRow(body, t) {
    var tr = h(body, "tr", {"class": "lat-row"});
    h(tr, "td", {"class": "num"}, t.turn);
    h(tr, "td", {"class": "num"}, t.first_word);
    h(tr, "td", {"class": "num"}, t.dead_air);
    h(tr, "td", {"class": "num"}, t.completion);
    h(tr, "td", {"class": "num"}, t.tools);
    h(tr, "td", {"class": "num"}, t.requests);
    h(tr, "td", null, t.streamed);
    var strip = h(h(tr, "td", {"class": "lat-cell"}), "div", {"class": "lat-strip"});
    t.bars.forEach(function (b) {
      h(strip, "span", {"class": "lat-" + b.kind, style: "left:" + b.left + "%;width:" + b.width + "%", title: b.title});
    });
    if (t.mark !== null) {
      h(strip, "span", {"class": "lat-mark", style: "left:" + t.mark + "%", title: "first word " + t.first_word + " ms"});
    }
    if (t.budget !== null) {
      h(strip, "span", {"class": "lat-budget", style: "left:" + t.budget + "%", title: t.budget_label, "data-label": t.budget_label});
    }
    add(body, "\n");
  }

  // One call's details.episode element from its data (messages and tool events leave out empty
  // values: a missing key reads as null, false, "" or []): the DOM templates/episode.html.j2
  // gives the single file (same elements, attributes, text and white space between elements).
  function buildCall(e) {
    var d = h(null, "details", {"class": "episode", id: e.anchor}, "\n");
    var g = e.grade, body;
    var s = h(d, "summary", null, txt(e.candidate) + " \u00b7 " + txt(e.agent_id) + " / " + txt(e.scenario_id) +
      " \u00b7 repeat " + e.repeat + " \u00b7 " + txt(e.language) + " \u00b7 " + txt(e.difficulty) + " \u00b7 " + txt(e.status));
    if (g) {
      add(s, " \u00b7 overall " + g.overall);
      if (e.passed !== null) { add(s, " \u00b7 "); h(s, "span", {"class": "verdict-" + (e.passed ? "pass" : "fail")}, e.passed ? "pass" : "fail"); }
    }
    add(d, "\n");
    var p = h(d, "p", null, "Run " + txt(e.run_id) + " \u00b7 episode " + txt(e.episode_id) + " \u00b7 end: " + txt(e.end_reason));
    if (e.skip_reason) { add(p, " \u00b7 "); h(p, "span", {"class": "bad"}, "skipped: " + txt(e.skip_reason)); }
    add(p, " \u00b7 caller " + txt(e.caller));
    if (e.brief) { add(p, " \u00b7 "); h(p, "a", {href: "#" + e.brief}, "caller brief"); }
    add(d, "\n");
    if (g) {
      h(d, "p", null, "Task " + g.task + " (" + g.task_points + " / " + g.task_weight + ") \u00b7 conversation " +
        g.conversation + " (" + g.conversation_points + " / " + g.conversation_weight + ") \u00b7 overall " +
        g.overall + " \u00b7 " + g.verdict + " \u00b7 judge errors " + g.judge_errors);
      add(d, "\n");
    }
    if (e.latency) {
      section(d, "Latency");
      h(d, "p", {"class": "ci"}, e.latency.note);
      add(d, "\n");
      body = wideTable(d, ["turn", "first word ms", "dead air ms", "complete ms", "tool round trips before speech",
        "requests", "streamed", "timeline"]);
      e.latency.turns.forEach(function (t) { latencyRow(body, t); });
    }
    if (e.messages.length) {
      body = wideTable(d, section(d, "Messages", ["#", "role", "content", "tool calls", "refs"]));
      e.messages.forEach(function (m) { messageRow(body, e, m); });
    }
    if (e.tool_events.length) {
      body = wideTable(d, section(d, "Tool events",
        ["#", "tool", "arguments", "outcome", "matchers / state changes", "result", "call ending"]));
      e.tool_events.forEach(function (t) { eventRow(body, e, t); });
    }
    if (e.caller_turns.length) {
      section(d, "Caller turns");
      h(d, "p", {"class": "ci"}, "Words the channel changed are marked: struck out in the intended text, highlighted in what the candidate heard.");
      add(d, "\n");
      body = wideTable(d, ["#", "intended", "heard (by the candidate)", "plan steps", "channel events", "messages"]);
      e.caller_turns.forEach(function (t) { turnRow(body, e, t); });
    }
    if (e.unreached_channel_events.length) {
      p = h(d, "p", {"class": "warn"}, "Authored channel events whose turn never came: ");
      e.unreached_channel_events.forEach(function (ev, i) {
        add(p, txt(ev.kind) + " at turn " + txt(ev.turn));
        if (ev.span) { add(p, " (\u201c"); h(p, "span", {lang: e.language}, ev.span); add(p, "\u201d)"); }
        if (i < e.unreached_channel_events.length - 1) { add(p, "; "); }
      });
      add(d, "\n");
    }
    if (e.judged.length) {
      body = wideTable(d, section(d, "Judge labels and checks",
        ["item", "pillar", "diagnostic", "weight", "label", "r", "reason", "cited messages", "cited tool events"]));
      e.judged.forEach(function (it) { judgedRow(body, it); });
    }
    d.normalize();
    return d;
  }

  window.callbenchBuildCall = buildCall;
})();
