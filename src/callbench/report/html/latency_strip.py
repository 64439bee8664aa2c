"""The latency strip of one call in the HTML trace viewer: one row per candidate turn with its
time to first word, dead air, completion time and tool round trips before speech, and a bar
showing the turn's timeline (CSS bars, ``lat-*`` classes in ``templates/report.html.j2``).

Every value is text, formatted here once, so the single file's template
(``templates/episode.html.j2``) and the folder report's script (``templates/call_view.js``) print
the same characters. Times are shown in whole milliseconds, as the report's latency tables
(``report/model/latency_text.py``). The figures are the trace's own
(:class:`~callbench.trace.TurnLatency`, computed by ``sim/latency.py``); the bars are laid out
from the turn's candidate requests (:class:`~callbench.trace.RequestLatency`) on the same
timeline ``sim/latency.py`` uses: request k starts ``gap_s`` after request k-1 ended; each bar
spans its own turn.
"""

from __future__ import annotations

from typing import Any

from callbench.trace import EpisodeLatency, RequestLatency, TurnLatency

LEGEND = (
    "Seconds from the end of the caller's turn, in ms. Bars: grey, waiting for the model's answer "
    "(tool-call answers included); green, the answer arriving after its first word; orange, tools "
    "running between requests; the black tick is the first word; the red dashed line is the latency "
    "budget (a turn that was over before it shows none). Each bar spans its own turn."
)


_SOURCES = {
    "replayed": " Timings replayed from the response cache (the original requests' times), not measured now.",
    "harness": " Timed by the episode loop (the client times nothing): no first token, latency = completion.",
    "mixed": " Timings partly replayed or timed by the loop (see each turn).",
}


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{1000 * seconds:.0f}"


def _pct(x: float, scale: float) -> str:
    return f"{100 * x / scale:.1f}" if scale > 0 else "0.0"


def _segments(requests: list[RequestLatency]) -> list[tuple[str, float, float, str]]:
    """``(kind, start, end, title)`` per stretch of the turn, seconds from its start: ``wait``
    (the request until its first word, or whole when it held no speech), ``speak`` (the rest of a
    request whose answer held speech) and ``tool`` (the gap before a later request)."""
    out: list[tuple[str, float, float, str]] = []
    at = 0.0
    for k, req in enumerate(requests):
        start = 0.0 if k == 0 else at + req.gap_s
        if k and req.gap_s > 0:
            out.append(("tool", at, start, f"tools {_ms(req.gap_s)} ms"))
        end = start + req.waited_s
        retries = f", {req.retries} retr{'y' if req.retries == 1 else 'ies'}" if req.retries else ""
        name = f"request {k + 1}"
        if req.speech:
            first = req.first_speech_s if req.first_speech_s is not None else req.waited_s
            ready = start + min(first, req.waited_s)
            label = "answer" if req.streamed else "answer, not streamed"
            out.append(("wait", start, ready, f"{name}: first word after {_ms(ready - start)} ms{retries}"))
            if end > ready:
                out.append(("speak", ready, end, f"{name}: {label} complete at {_ms(end - start)} ms"))
        else:
            n = req.tool_calls
            calls = f"{n} tool call{'' if n == 1 else 's'}" if n else "no speech"
            out.append(("wait", start, end, f"{name}: {calls} after {_ms(req.waited_s)} ms{retries}"))
        at = end
    return out


def _turn_row(turn: TurnLatency, requests: list[RequestLatency], budget_s: float | None) -> dict[str, Any]:
    # each turn on its own scale: the greeting reads the whole system prompt and can take a
    # hundred times longer than later turns, which a shared scale would flatten to nothing
    scale = max(turn.completion_s, turn.time_to_first_word_s or 0.0)
    bars = [
        {"kind": kind, "left": _pct(a, scale), "width": _pct(b - a, scale), "title": title}
        for kind, a, b, title in _segments(requests)
    ]
    first = turn.time_to_first_word_s
    return {
        "turn": str(turn.turn),
        "first_word": _ms(first),
        "dead_air": _ms(turn.dead_air_s),
        "completion": _ms(turn.completion_s),
        "tools": str(turn.tool_round_trips_before_speech),
        "requests": str(turn.requests) + (f" ({turn.retries} retried)" if turn.retries else ""),
        "streamed": ("streamed" if turn.streamed else "not streamed") + (
            "" if turn.source == "measured" else f", {turn.source}"),
        "bars": bars,
        "mark": _pct(first, scale) if first is not None else None,
        # the budget is drawn where it falls on the turn's own scale; past the turn's end it
        # would stretch every short turn's bar, so it is left out there
        "budget": _pct(budget_s, scale) if budget_s is not None and 0 < budget_s <= scale else None,
        "budget_label": "" if budget_s is None else f"budget {_ms(budget_s)} ms",
    }


def latency_view(latency: EpisodeLatency | None, budget_s: float | None = None) -> dict[str, Any] | None:
    """The strip of one call from its trace's timings, or None when it has none (older traces,
    or no candidate turn). ``{"note": str, "turns": [row]}``; each row holds ``turn``,
    ``first_word``, ``dead_air``, ``completion`` (ms), ``tools`` (round trips before speech),
    ``requests``, ``streamed`` (text), ``bars`` (``kind`` of ``wait``/``speak``/``tool``,
    ``left`` and ``width`` in percent of the turn's own time, ``title``) and ``mark`` (the
    first word's position in percent, or None), ``budget`` (where ``budget_s``, the latency
    budget in seconds, falls in percent; None when the turn was over before it or no budget was
    given) and ``budget_label``. Values are strings (or None): nothing is formatted later."""
    if latency is None or not latency.turns:
        return None
    by_turn: dict[int, list[RequestLatency]] = {}
    for req in latency.requests:
        if req.role == "candidate":
            by_turn.setdefault(req.turn, []).append(req)
    sources = {t.source for t in latency.turns}  # the candidate's own (the caller's are not shown)
    source = _SOURCES.get(sources.pop() if len(sources) == 1 else "mixed", "")
    rate = f" Speech rate {latency.speech_rate}." if latency.speech_rate else ""
    return {
        "note": LEGEND + source + rate,
        "turns": [_turn_row(t, by_turn.get(t.turn, []), budget_s) for t in latency.turns],
    }
