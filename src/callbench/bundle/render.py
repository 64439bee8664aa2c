"""Render an agent's operating document (a jinja2 template) for a scenario, in a bounded sandbox.

The operating document is one file; rendering runs in jinja2's sandbox with bounded work (ranges,
repetitions, string formatting, filters: :mod:`callbench.bundle.template_limits`) and refuses
statements that load another template. :func:`static_prefix_chars` gives the part of a rendered
document that is the same for every scenario.
"""

from __future__ import annotations

import contextvars
import functools
import unicodedata
from datetime import datetime
from typing import Any

from jinja2 import (
    FunctionLoader,
    StrictUndefined,
    Template,
    TemplateError,
    TemplateSyntaxError,
    Undefined,
    nodes,
)
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from callbench.bundle import template_limits
from callbench.bundle.loader import MAX_PROMPT_CHARS
from callbench.bundle.models import LoadedAgent, Scenario
from callbench.bundle.normalize import nfc_joined


def _at(e: BaseException) -> str:
    line = template_limits.template_line(e.__traceback__)
    return f"line {line}: " if line is not None else ""


def render_instructions(agent: LoadedAgent, scenario: Scenario | None = None) -> str:
    """Render the agent's operating document for a scenario (or with neutral defaults).

    Variables: ``date`` (YYYY-MM-DD), ``time`` (HH:MM), ``weekday`` (English name), ``agent_name``,
    ``now`` (the ISO 8601 date and time, for the ``date`` filter: ``{{ now | date('%B %d') }}``),
    then the agent's ``variables`` and the scenario's ``variables`` (scenario wins). Date and time
    come from the scenario brief's ISO 8601 ``datetime``. Returns NFC text (Unicode normalisation
    form C). Raises ``ValueError`` on an undefined variable or template error.
    """
    when = None
    if scenario is not None:
        try:
            when = datetime.fromisoformat(scenario.brief.datetime)
        except ValueError:
            raise ValueError(f"brief.datetime {scenario.brief.datetime!r} is not ISO 8601") from None
    vars_: dict[str, str] = {
        "date": when.strftime("%Y-%m-%d") if when else "{{date}}",
        "time": when.strftime("%H:%M") if when else "{{time}}",
        "weekday": when.strftime("%A") if when else "{{weekday}}",
        "agent_name": agent.config.name,
        "now": when.isoformat() if when else "{{now}}",
    }
    vars_.update(agent.config.variables)
    if scenario is not None:
        vars_.update(scenario.variables)
    token = _RANGE_BUDGET.set([MAX_RENDER_RANGE_ITEMS])
    try:
        chunks: list[str] = []
        size = 0
        for chunk in _compiled(agent.instructions_template).generate(**vars_):
            size += len(chunk)
            if size > MAX_RENDER_CHARS:
                raise ValueError(
                    f"instructions template: the rendered text passes {MAX_RENDER_CHARS:,} characters"
                )
            chunks.append(chunk)
    except TemplateSyntaxError as e:
        raise ValueError(f"instructions template: line {e.lineno}: {e.message}") from None
    except TemplateError as e:
        raise ValueError(f"instructions template: {_at(e)}{e}") from None
    except RecursionError:
        raise ValueError("instructions template: nested too deeply") from None
    except Exception as e:  # a Python error inside an expression: {{ 1/0 }}, {{ 'a' + 1 }}, any filter's
        raise ValueError(f"instructions template: {_at(e)}{type(e).__name__}: {e}"[:400]) from None
    finally:
        _RANGE_BUDGET.reset(token)
    return nfc_joined(chunks)


def static_prefix_chars(agent: LoadedAgent, rendered: str) -> int:
    """How many leading characters of ``rendered`` (this agent's operating document as rendered
    for some scenario) are the same for every scenario: the template's literal text before its
    first Jinja tag (``{{``, ``{%`` or ``{#``), as far as ``rendered`` starts with it (a ``{%-``
    tag strips the whitespace before it). Providers may cache or place shared material at this
    boundary (``ModelRequest.static_system_chars``)."""
    template = agent.instructions_template
    starts = [i for i in (template.find("{{"), template.find("{%"), template.find("{#")) if i >= 0]
    return common_prefix_len(_nfc_literal(template[: min(starts)] if starts else template), rendered)


@functools.lru_cache(maxsize=64)
def _nfc_literal(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def common_prefix_len(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (characters): what
    ``len(os.path.commonprefix([a, b]))`` gives, by comparing slices (a binary search, each step
    one C-level comparison) instead of ``commonprefix``'s character-by-character Python loop, which
    cost ``callbench audit`` 0.2 s over the starter's 100 documents of ~35,000 characters."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


MAX_RENDER_CHARS = 4 * MAX_PROMPT_CHARS
"""Rendering stops past this many characters (``size.prompt`` reports anything over
``MAX_PROMPT_CHARS`` below it): a runaway template never fills memory."""
MAX_RENDER_RANGE_ITEMS = 100_000
"""Items all ``range()`` calls of one render may produce together: nested loops over big ranges
would otherwise run for hours (jinja's sandbox caps each call, not their product)."""
_RANGE_BUDGET: contextvars.ContextVar[list[int]] = contextvars.ContextVar("range_budget")


class _BoundedSandbox(SandboxedEnvironment):
    """jinja2's sandbox with bounded work: ``range`` draws on a per-render item budget, and
    ``*`` / ``**`` refuse to build a huge string, list or number (jinja2 sandbox docs,
    "Operator Intercepting")."""

    intercepted_binops = frozenset({"*", "**", "%"})

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        """A sandboxed call, refused when it would build a huge result (:mod:`.template_limits`)."""
        if not isinstance(__obj, Undefined):  # calling an undefined name fails as undefined
            template_limits.bounded_call(__obj, args, kwargs, MAX_RENDER_CHARS)
        result = super().call(__context, __obj, *args, **kwargs)
        return template_limits.check_result(getattr(__obj, "__name__", "call"), result, MAX_RENDER_CHARS)

    def wrap_str_format(self, value: Any) -> Any:
        """``str.format`` / ``format_map`` as jinja2 sandboxes them, refusing a huge field width."""
        owner = getattr(value, "__self__", None)
        if isinstance(owner, str) and getattr(value, "__name__", "") in ("format", "format_map"):
            template_limits.check_brace_format(owner, MAX_RENDER_CHARS)
        return super().wrap_str_format(value)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "%" and isinstance(left, str):
            template_limits.check_percent_format(left, MAX_RENDER_CHARS)
        if operator == "**" and isinstance(right, int | float) and abs(right) > 1000:
            raise SecurityError("an exponent over 1000 is not allowed in instructions")
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                sized = isinstance(seq, str | list | tuple) and isinstance(times, int)
                if sized and len(seq) * times > MAX_RENDER_CHARS:
                    raise SecurityError(f"a repetition over {MAX_RENDER_CHARS:,} items is not allowed")
        return super().call_binop(context, operator, left, right)


def _bounded_range(*args: int) -> range:
    items = range(*args)
    budget = _RANGE_BUDGET.get(None)
    if budget is not None:
        budget[0] -= len(items)
        if budget[0] < 0:
            raise SecurityError(f"range() over {MAX_RENDER_RANGE_ITEMS:,} items in all is not allowed")
    return items


def _no_other_template(name: str) -> None:
    """The loader of the instructions environment: no template but the operating document exists
    (so a dynamic ``{% include name %}`` fails as a template error, never a TypeError)."""
    return None


_ENV = _BoundedSandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True,
                       loader=FunctionLoader(_no_other_template))
_ENV.globals["range"] = _bounded_range
del _ENV.globals["lipsum"]  # lorem ipsum has no place in an operating document (and lipsum(10**6) hangs)
def _date_filter(value: Any, fmt: str = "%Y-%m-%d") -> str:
    """``{{ now | date('%A, %B %d, %Y') }}``: the call's date and time (ISO 8601 ``now``) in a
    strftime format, as a Liquid ``date`` filter on ``'now'`` writes it in Vapi and Retell prompts.
    Neutral rendering (no scenario) keeps a visible placeholder."""
    if fmt.count("%") > 20 or len(fmt) > 200:
        raise SecurityError("a date format over 200 characters or 20 fields is not allowed")
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        return f"{{{{now | date({fmt!r})}}}}"
    return when.strftime(fmt)


_ENV.filters = {
    name: template_limits.bounded_filter(name, f, MAX_RENDER_CHARS) for name, f in _ENV.filters.items()
}
_ENV.filters["date"] = _date_filter

_LOADING_NODES: dict[type[nodes.Node], str] = {
    nodes.Include: "include", nodes.Extends: "extends", nodes.Import: "import", nodes.FromImport: "from",
}
"""Template statements that load another template (jinja2 docs, "Template Inheritance", "Include",
"Import"): the operating document is one file, so each is refused wherever it stands, even in a
branch that neutral values never take."""


@functools.lru_cache(maxsize=64)
def _compiled(template: str) -> Template:
    """Compile an instructions template once (jinja2 parsing costs ~20 ms for a 30,000-character
    document; a bundle renders each agent's template once per scenario).

    Raises ``TemplateSyntaxError`` for a syntax error or for a statement that loads another
    template (:data:`_LOADING_NODES`), naming its line."""
    tree = _ENV.parse(template)
    for node in tree.find_all(tuple(_LOADING_NODES)):
        kw = _LOADING_NODES[type(node)]
        raise TemplateSyntaxError(
            f"{{% {kw} %}} is not allowed: the operating document is a single file "
            "and no other template is loaded (write the text in prompt.md, or use a variable)",
            node.lineno,
        )
    return _ENV.from_string(tree)
