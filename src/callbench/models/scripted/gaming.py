"""Gaming candidates of the audit's floor: scripted agents that try to collect
action-check weight without doing the task. Deterministic: every argument is drawn from a
``random.Random`` seeded by SHA-256 of (the settings' seed, spec, scenario id, tool name, call
number), so the same audit gives the same trace.

``scripted:junk-lookups``
    Greets, then calls every *lookup* tool (:func:`is_lookup`) once with schema-valid but wrong
    arguments (:func:`junk_arguments`), at most ``max_calls`` per turn in one message, then only
    talks (never ends the call itself).
``scripted:junk-all``
    Greets, then calls every tool that is not call-ending once with junk arguments (at most
    ``max_calls`` per turn), then hangs up as ``scripted:hangup`` does.
``scripted:claim-done``
    Never calls a tool; on every turn says the request has been taken care of and is done.
``scripted:caller-values``
    Greets, then for :data:`ROUNDS` candidate turns calls every tool that is not call-ending (at
    most ``max_calls`` per turn) with schema-valid arguments filled from what the caller states
    (:func:`stated_values`, :class:`CallerValues`), a different stated value per round where
    several fit, then hangs up as ``scripted:hangup`` does. It never reads hidden state or
    fixtures: its values are the known facts of the caller's brief that the caller has said so far,
    and the value-like tokens of the caller's speech.

For the junk candidates "wrong" means: no drawn string or number equals a value of the scenario's
brief facts, hidden state or fixture matchers (a draw that does is drawn again, up to 20 times),
so a junk call reaches no record the scenario authored except by the enum members the schema
forces.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import random
import re
import re._parser as sre  # the stdlib's regex parser (Python 3.11+), walked to draw matching strings
import unicodedata
from datetime import date, timedelta
from typing import Any

import jsonschema

from callbench.models.base import ModelRequest, ModelResponse, ToolCall, ToolSchema
from callbench.models.scripted.hangup import HangupCandidate

LOOKUP_VERBS = re.compile(
    r"^(get|lookup|look_up|find|search|check|verify|list|fetch|query|read|show|view|track|locate|trace)"
    r"(_|$)",
    re.IGNORECASE,
)
"""A tool whose name starts with one of these verbs reads a record (the starter names its tools
so); :func:`is_lookup`."""
ROUNDS = 3
"""Candidate turns in which ``scripted:caller-values`` sprays every non-ending tool."""
MAX_CALLS = 10
"""Junk calls per candidate turn: the episode loop's default tool-call limit per turn."""
_RETRIES = 20
_MAX_REPEAT = 12


def is_lookup(tool: ToolSchema) -> bool:
    """True when ``tool``'s name starts with a read verb (:data:`LOOKUP_VERBS`)."""
    return bool(LOOKUP_VERBS.match(tool.name))


def _seed(*parts: object) -> int:
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _class_chars(items: list[tuple[Any, Any]]) -> list[str]:
    out: list[str] = []
    for op, av in items:
        if op is sre.LITERAL:
            out.append(chr(av))
        elif op is sre.RANGE:
            out += [chr(c) for c in range(av[0], min(av[1], av[0] + 94) + 1)]
        elif op is sre.CATEGORY:
            out += list("0123456789") if av is sre.CATEGORY_DIGIT else list("abcdefghXYZ")
    return out or ["x"]


def _draw(tree: Any, rng: random.Random) -> str:
    out: list[str] = []
    for op, av in tree:
        if op is sre.LITERAL:
            out.append(chr(av))
        elif op is sre.ANY:
            out.append(rng.choice("ABCDEFGH"))
        elif op is sre.IN:
            if av and av[0][0] is sre.NEGATE:
                banned = set(_class_chars(av[1:]))
                out.append(next(c for c in "xyzXYZ019" if c not in banned))
            else:
                out.append(rng.choice(_class_chars(av)))
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            lo, hi, sub = av
            hi = lo + _MAX_REPEAT if hi is sre.MAXREPEAT else hi
            out += [_draw(sub, rng) for _ in range(rng.randint(lo, max(lo, hi)))]
        elif op is sre.SUBPATTERN:
            out.append(_draw(av[-1], rng))
        elif op is sre.BRANCH:
            out.append(_draw(rng.choice(av[1]), rng))
        elif op is sre.CATEGORY:
            out.append("7" if av is sre.CATEGORY_DIGIT else "x")
        # AT (anchors) and anything else add no characters
    return "".join(out)


def string_matching(pattern: str, rng: random.Random) -> str:
    """A string that ``re.search(pattern, s)`` accepts, drawn with ``rng`` (anchored patterns of
    literals, classes, repeats, groups and alternations; unbounded repeats draw at most 12)."""
    return _draw(sre.parse(pattern), rng)


class _Draw:
    """Draws schema-valid values that avoid a set of texts (the scenario's own values)."""

    def __init__(self, rng: random.Random, avoid: set[str]) -> None:
        self.rng = rng
        self.avoid = avoid

    def value(self, schema: Any) -> Any:
        for _ in range(_RETRIES):
            v = self._once(schema)
            if isinstance(v, (dict, list, bool)) or str(v) not in self.avoid:
                return v
        return v

    def _once(self, s: Any) -> Any:
        rng = self.rng
        if not isinstance(s, dict):
            return "x"
        if "const" in s:
            return s["const"]
        if s.get("enum"):
            return rng.choice(s["enum"])
        t = s.get("type", "string")
        t = t[0] if isinstance(t, list) and t else t
        if t == "object":
            return self.obj(s)
        if t == "array":
            n = max(int(s.get("minItems", 1)), 1)
            items: list[Any] = []
            for _ in range(n * _RETRIES):
                v = self.value(s.get("items", {}))
                if not (s.get("uniqueItems") and v in items):
                    items.append(v)
                if len(items) >= n:
                    break
            return items
        if t == "boolean":
            return rng.choice([True, False])
        if t in ("integer", "number"):
            lo = s.get("minimum", s.get("exclusiveMinimum", 0) + (1 if "exclusiveMinimum" in s else 0))
            hi = s.get("maximum", lo + 1000)
            step = s.get("multipleOf", 1)
            k = rng.randint(0, int((hi - lo) // step)) if hi >= lo else 0
            v = lo + k * step
            return int(v) if t == "integer" or float(v).is_integer() else v
        day = (date(2020, 1, 1) + timedelta(days=rng.randint(0, 3000))).isoformat()
        if s.get("format") == "date" or ("pattern" in s and re.search(s["pattern"], day)):
            return day  # a real calendar date where a date fits (a pattern alone allows month 19)
        if "pattern" in s:
            return string_matching(s["pattern"], rng)
        lo, hi = int(s.get("minLength", 0)), int(s.get("maxLength", 40))
        word = "junk" + "".join(rng.choice("qwxz") for _ in range(6))
        return (word * (lo // len(word) + 1))[: max(lo, min(hi, len(word)))]

    def obj(self, s: dict[str, Any]) -> dict[str, Any]:
        props = s.get("properties", {}) or {}
        names = list(s.get("required", []))
        for key in ("anyOf", "oneOf"):
            alts = s.get(key) or []
            if alts and isinstance(alts[0], dict):
                names += [n for n in alts[0].get("required", []) if n not in names]
        extra = [n for n in props if n not in names]
        names += extra[: max(0, int(s.get("minProperties", 0)) - len(names))]
        return {n: self.value(props.get(n, {})) for n in names}


def junk_arguments(schema: dict[str, Any], rng: random.Random, avoid: set[str]) -> dict[str, Any]:
    """Arguments for a tool with JSON Schema ``schema``: its required properties (and those the first
    ``anyOf`` / ``oneOf`` alternative requires), each drawn with ``rng`` to satisfy its own schema
    (enum / const, type, pattern, date format, bounds, multipleOf, minItems) and to differ from every
    text in ``avoid``."""
    return _Draw(rng, avoid).obj(schema)


def _scalars(v: Any) -> set[str]:
    """The text of every scalar (not None, not a boolean) inside ``v``, object keys excluded."""
    if isinstance(v, dict):
        return set().union(set(), *(_scalars(x) for x in v.values()))
    if isinstance(v, list):
        return set().union(set(), *(_scalars(x) for x in v))
    return set() if v is None or isinstance(v, bool) else {str(v)}


_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9./:-]{2,}[A-Za-z0-9]")


class CallerValues(_Draw):
    """Draws arguments from the values a caller states: for each property the stated values that
    its schema accepts (as given, or as a number when the schema wants one), best name match first
    (the fact's key against the property's name), the ``round``-th of them; a property no stated
    value fits gets a schema-valid draw (:class:`_Draw`, avoiding nothing). Optional properties are
    filled only when a stated value fits them."""

    def __init__(self, rng: random.Random, stated: list[tuple[str, Any]], round_: int) -> None:
        super().__init__(rng, set())
        self.stated = stated
        self.round = round_

    def fitting(self, name: str, schema: Any) -> list[Any]:
        """The stated values ``schema`` accepts, best name match with ``name`` first."""
        if not isinstance(schema, dict):
            return []
        try:
            check = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
        except Exception:
            return []
        scored: list[tuple[float, int, Any]] = []
        for i, (key, v) in enumerate(self.stated):
            forms = [v]
            if isinstance(v, str) and re.fullmatch(r"-?\d+(\.\d+)?", v):
                forms.append(float(v) if "." in v else int(v))
            for f in forms:
                if check.is_valid(f):
                    ratio = difflib.SequenceMatcher(None, key.lower(), name.lower()).ratio()
                    scored.append((-ratio, i, f))
                    break
        out: list[Any] = []
        for _, _, f in sorted(scored, key=lambda x: (x[0], x[1])):
            if f not in out:
                out.append(f)
        return out

    def named(self, name: str, schema: Any) -> Any:
        fit = self.fitting(name, schema)
        if fit:
            return fit[self.round % len(fit)]
        if isinstance(schema, dict) and schema.get("enum"):
            return schema["enum"][self.round % len(schema["enum"])]
        if isinstance(schema, dict) and schema.get("type") == "object":
            return self.obj(schema)
        return self.value(schema)

    def obj(self, s: dict[str, Any]) -> dict[str, Any]:
        props = s.get("properties", {}) or {}
        base = super().obj(s)
        out = {n: self.named(n, props.get(n, {})) for n in base}
        for n, p in props.items():
            if n not in out and self.fitting(n, p):
                out[n] = self.named(n, p)
        return out


def _squash(text: str) -> str:
    """``text`` case-folded without spaces, hyphens, dots and slashes: "NB 2154-7790" -> "nb21547790"."""
    return re.sub(r"[\s\-./]", "", unicodedata.normalize("NFC", text)).casefold()


def stated_values(known_facts: dict[str, Any], speech: list[str]) -> list[tuple[str, Any]]:
    """(name, value) of every scalar the caller has stated in ``speech``: each known fact (nested
    values under their dotted key) whose text occurs in the speech (compared by :func:`_squash`,
    so a number said in groups counts), then each value-like token of the speech (letters and
    digits, 4 characters or more, with a digit). The brief is used only to name what was said: a
    fact the caller never said is not a stated value."""
    said = _squash(" ".join(speech))
    out: list[tuple[str, Any]] = []

    def walk(key: str, v: Any) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                walk(f"{key}.{k}", x)
        elif isinstance(v, list):
            for x in v:
                walk(key, x)
        elif v is not None and not isinstance(v, bool) and _squash(str(v)) and _squash(str(v)) in said:
            out.append((key, v))

    for k, v in known_facts.items():
        walk(k, v)
    for text in speech:
        out += [("", t) for t in _TOKEN.findall(text) if any(c.isdigit() for c in t)]
    return out


class GamingCandidate(HangupCandidate):
    """``scripted:junk-lookups``, ``scripted:junk-all``, ``scripted:claim-done`` and
    ``scripted:caller-values`` (module docstring)."""

    DONE = "I have taken care of that for you; it is all done now. Is there anything else?"
    WAIT = "One moment, I am checking that."
    TALK = "I understand. I am here to help you with that, please go on."

    def _avoid(self, request: ModelRequest) -> set[str]:
        if self.bundle is None:
            return set()
        try:
            _, scen = self._scenario(request)
        except Exception:
            return set()
        return _scalars([scen.brief.known_facts, scen.hidden_state, scen.model_dump(mode="json")["fixtures"]])

    def _targets(self, request: ModelRequest) -> list[ToolSchema]:
        ending = {t.name for t in request.tools if "concluding_message" in t.parameters.get("properties", {})}
        if self.bundle is not None and request.context.agent_id in self.bundle.agents:
            ending = {c.tool for c in self.bundle.agents[request.context.agent_id].config.call_ending_tools}
        tools = [t for t in request.tools if t.name not in ending]
        if self.spec == "scripted:junk-lookups":
            tools = [t for t in tools if is_lookup(t)]
        return tools

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.context.turn == 0:
            return self._reply(HangupCandidate.GREETING.format(name=self._name(request)))
        if self.spec == "scripted:claim-done":
            return self._reply(self.DONE)
        if request.messages and request.messages[-1].role == "tool":
            return self._reply(self.WAIT)
        if self.spec == "scripted:caller-values":
            return await self._caller_values(request)
        called = {c.name for m in request.messages for c in m.tool_calls}
        todo = [t for t in self._targets(request) if t.name not in called][:MAX_CALLS]
        if todo:
            avoid = self._avoid(request)
            seed = self.settings.seed or 0
            calls = []
            for i, t in enumerate(todo):
                rng = random.Random(_seed(seed, self.spec, request.context.scenario_id, t.name))
                args = junk_arguments(t.parameters, rng, avoid)
                calls.append(
                    ToolCall(id=f"junk_{request.context.turn}_{i}", name=t.name, arguments=json.dumps(args))
                )
            return self._reply(self.WAIT, calls)
        if self.spec == "scripted:junk-lookups":
            return self._reply(self.TALK)
        return await super().complete(request)

    async def _caller_values(self, request: ModelRequest) -> ModelResponse:
        called = {c.id.split("_")[0] + "_" + c.name for m in request.messages for c in m.tool_calls}
        facts: dict[str, Any] = {}
        if self.bundle is not None:
            try:
                facts = self._scenario(request)[1].brief.known_facts  # the caller's brief only
            except Exception:
                facts = {}
        speech = [m.content or "" for m in request.messages if m.role == "user"]
        stated = stated_values(facts, speech)
        for r in range(ROUNDS):
            todo = [t for t in self._targets(request) if f"cv{r}_{t.name}" not in called][:MAX_CALLS]
            if not todo:
                continue
            calls = []
            for i, t in enumerate(todo):
                seed = _seed(self.settings.seed or 0, self.spec, request.context.scenario_id, t.name, r)
                rng = random.Random(seed)
                args = CallerValues(rng, stated, r).obj(t.parameters)
                calls.append(ToolCall(id=f"cv{r}_{request.context.turn}_{i}", name=t.name,
                                      arguments=json.dumps(args, ensure_ascii=False)))
            return self._reply(self.WAIT, calls)
        return await super().complete(request)

    def _name(self, request: ModelRequest) -> str:
        if self.bundle is not None and request.context.agent_id in self.bundle.agents:
            return self.bundle.agents[request.context.agent_id].config.name
        return "the service"
