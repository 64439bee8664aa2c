"""Importing prompts written for voice-agent platforms: their ``{{ }}`` templates.

Vapi and Retell prompts use Liquid: ``{{ customer.name | default: 'there' }}``,
``{{'now' | date: '%A, %B %d, %Y', 'America/Los_Angeles'}}``, ``{% if vip %}...{% endif %}``.
An operating document here is a jinja2 template (``bundle/loader.py``), so ``callbench new-agent``
translates, with :func:`import_template`:

``--template auto`` (the default)
    each ``{{ expression }}`` becomes a jinja2 expression over a *declared* variable: a dotted
    name becomes one name (``customer.name`` -> ``customer_name``), written to the agent's
    ``variables`` with its default (the ``default:`` filter's value, else a visible placeholder
    ``[customer_name]``; a name first seen in an ``if`` defaults to '', false), so every scenario
    renders and a scenario may set its own value.
    ``'now' | date: FORMAT[, TIMEZONE]`` becomes ``now | date('FORMAT')``: the call's own date and
    time (``brief.datetime``, already local, so the time zone is dropped and noted).
    ``upcase`` / ``downcase`` / ``capitalize`` become ``upper`` / ``lower`` / ``capitalize``.
    Tags: ``if`` / ``elsif`` / ``else`` / ``endif`` / ``unless`` / ``endunless`` / ``assign``
    / ``comment`` / ``endcomment`` / ``raw`` / ``endraw``. Anything else (another filter, ``for``,
    ``case``, a filter argument that is not a literal) is refused with an error that names the
    syntax, its line, and the way out: ``--template none``.
``--template none``
    no templating: the prompt is kept verbatim (wrapped in ``{% raw %}``), ``{{ }}`` included.

A prompt that already is a jinja2 template as callbench writes them (it parses, with no
Liquid-only tag and no dotted variable) is kept as written; only its undefined variables are
declared, with the placeholder default. Either way the result is checked by compiling it as the
loader will; the declared variables and notes are returned for ``agent.yaml`` and the command's
output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

TemplateMode = Literal["auto", "none"]
BUILTIN = frozenset({"date", "time", "weekday", "agent_name", "now"})
"""Variables the loader provides for every call (``render_instructions``)."""
_FILTERS = {"upcase": "upper", "downcase": "lower", "capitalize": "capitalize"}
_EXPR = re.compile(r"\{\{-?(.*?)-?\}\}", re.DOTALL)
_TAG = re.compile(r"\{%-?\s*(\w+)(.*?)-?%\}", re.DOTALL)
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_LITERAL = re.compile(r"""'[^']*'|"[^"]*"|-?[0-9]+(?:\.[0-9]+)?|true|false""")


class TemplateImportError(ValueError):
    """The prompt's template syntax cannot be translated (message: line, syntax, way out)."""


@dataclass
class ImportedTemplate:
    """The operating document as a template, its declared variables (name -> default) and notes."""

    text: str
    variables: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _split_pipes(expr: str) -> list[str]:
    parts, buf, quote = [], [], ""
    for c in expr:
        if quote:
            buf.append(c)
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
            buf.append(c)
        elif c == "|":
            parts.append("".join(buf).strip())
            buf = []
        else:
            buf.append(c)
    parts.append("".join(buf).strip())
    return parts


def _args(raw: str) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"""\s*('[^']*'|"[^"]*"|[^,\s][^,]*)\s*(?:,|$)""", raw)]


def _unquote(lit: str) -> str:
    return lit[1:-1] if lit[:1] in "'\"" else lit


class _Translator:
    def __init__(self, text: str, source: str) -> None:
        self.text, self.source = text, source
        self.variables: dict[str, str] = {}
        self.notes: list[str] = []

    def fail(self, pos: int, what: str) -> TemplateImportError:
        return TemplateImportError(
            f"{self.source} line {_line(self.text, pos)}: {what}; callbench translates the Liquid "
            "templates of Vapi and Retell prompts only in part (docs/generating.md, \"Importing a "
            "prompt\"): rewrite that expression, or import the prompt with --template none (no "
            "templating: {{ }} kept as written)"
        )

    def name(self, path: str, default: str | None = None) -> str:
        """The declared name of ``path``; first declared with ``default`` (a visible placeholder
        ``[name]`` when None; a name first seen in a condition defaults to '', which is false)."""
        name = path.replace(".", "_")
        if name not in BUILTIN and name not in self.variables:
            self.variables[name] = f"[{name}]" if default is None else default
        return name

    def rename_paths(self, expr: str, pos: int) -> str:
        """Dotted names in a condition become declared variables; literals and keywords stay."""
        out, i = [], 0
        for m in re.finditer(r"""'[^']*'|"[^"]*"|[A-Za-z_][A-Za-z0-9_.]*""", expr):
            out.append(expr[i : m.start()])
            tok = m.group(0)
            if tok[:1] in "'\"" or tok in ("and", "or", "not", "true", "false", "nil", "null", "empty"):
                out.append({"nil": "none", "null": "none", "empty": "''"}.get(tok, tok))
            elif tok == "contains":
                raise self.fail(pos, f"the Liquid operator 'contains' in {{% if{expr} %}} has no equivalent")
            else:
                out.append(self.name(tok, default=""))
            i = m.end()
        out.append(expr[i:])
        return "".join(out)

    def expression(self, m: re.Match[str] | _Shifted) -> str:
        raw = m.group(1)
        parts = _split_pipes(raw)
        head, filters = parts[0], parts[1:]
        if head in ("'now'", '"now"', "'today'", '"today"'):
            subject = "now"
        elif _PATH.fullmatch(head):
            subject = self.name(head)
        elif _LITERAL.fullmatch(head):
            subject = head
        else:
            raise self.fail(m.start(), f"{{{{{raw}}}}} is not a variable, a literal or 'now'")
        if not filters and subject == head:
            return m.group(0)  # already a plain jinja2 name: the text stays as written
        out = subject
        for f in filters:
            fname, _, argtext = f.partition(":")
            fname, args = fname.strip(), _args(argtext)
            if any(not _LITERAL.fullmatch(a) for a in args):
                raise self.fail(m.start(), f"the filter {f!r} in {{{{{raw}}}}} has an argument that is "
                                "not a literal")
            if fname == "default":
                if subject in self.variables and args:
                    self.variables[subject] = _unquote(args[0])
                else:
                    out = f"{out} | default({args[0] if args else ''!r})"
            elif fname == "date":
                if not args:
                    raise self.fail(m.start(), f"the date filter in {{{{{raw}}}}} needs a format")
                out = f"{out} | date({args[0]})"
                if len(args) > 1:
                    self.notes.append(
                        f"line {_line(self.text, m.start())}: time zone {args[1]} dropped from "
                        f"{{{{{raw.strip()}}}}}: "
                        "the call's date and time come from the scenario's brief.datetime, already local"
                    )
            elif fname in _FILTERS:
                out = f"{out} | {_FILTERS[fname]}"
            else:
                raise self.fail(m.start(), f"the Liquid filter {fname!r} in {{{{{raw}}}}} has no equivalent")
        return "{{ " + out + " }}"

    def tag(self, m: re.Match[str] | _Shifted) -> str:
        kw, rest = m.group(1), m.group(2).strip()
        if kw in ("if", "elsif"):
            return "{% " + ("if" if kw == "if" else "elif") + " " + self.rename_paths(rest, m.start()) + " %}"
        if kw == "unless":
            return "{% if not (" + self.rename_paths(rest, m.start()) + ") %}"
        if kw in ("else", "endif"):
            return "{% " + kw + " %}"
        if kw == "endunless":
            return "{% endif %}"
        if kw == "assign":
            target, eq, value = rest.partition("=")
            if not eq or not _PATH.fullmatch(target.strip()) or not _LITERAL.fullmatch(value.strip()):
                raise self.fail(m.start(), f"{{% assign {rest} %}} is not NAME = literal")
            return "{% set " + target.strip().replace(".", "_") + " = " + value.strip() + " %}"
        if kw == "comment":
            return "{#"
        if kw == "endcomment":
            return "#}"
        raise self.fail(m.start(), f"the Liquid tag {{% {kw} %}} has no equivalent")

    def run(self) -> str:
        out, i = [], 0
        raw_block = re.compile(r"\{%-?\s*raw\s*-?%\}.*?\{%-?\s*endraw\s*-?%\}", re.DOTALL)
        token = re.compile(f"{raw_block.pattern}|{_EXPR.pattern}|{_TAG.pattern}", re.DOTALL)
        for m in token.finditer(self.text):
            out.append(self.text[i : m.start()])
            piece = m.group(0)
            if raw_block.fullmatch(piece):
                out.append(piece)
            elif piece.startswith("{{"):
                em = _EXPR.fullmatch(piece)
                assert em is not None
                out.append(self.expression(_Shifted(em, m.start())))
            else:
                tm = _TAG.fullmatch(piece)
                assert tm is not None
                out.append(self.tag(_Shifted(tm, m.start())))
            i = m.end()
        out.append(self.text[i:])
        return "".join(out)


class _Shifted:
    """A tag match with its position in the whole text (for error lines)."""

    def __init__(self, m: re.Match[str], start: int) -> None:
        self._m, self._start = m, start

    def group(self, k: int) -> str:
        return self._m.group(k)

    def start(self) -> int:
        return self._start


_LIQUID_ONLY = re.compile(
    r"\{%-?\s*(assign|elsif|unless|endunless|comment|endcomment|case|when|endcase|capture|endcapture|"
    r"increment|decrement|tablerow|endtablerow)\b"
)


def _is_jinja(text: str) -> bool:
    """True when ``text`` is already a jinja2 template as callbench writes them: it parses, uses no
    Liquid-only tag, and names no dotted variable in ``{{ }}`` (a Liquid object path)."""
    from jinja2 import TemplateSyntaxError

    from callbench.bundle.render import _ENV

    if _LIQUID_ONLY.search(text):
        return False
    for m in _EXPR.finditer(text):
        head = _split_pipes(m.group(1))[0]
        if "." in head and _PATH.fullmatch(head):
            return False
    for m in _TAG.finditer(text):
        unquoted = re.sub(r"'[^']*'|\"[^\"]*\"", "", m.group(2))
        if re.search(r"[A-Za-z_]\w*\.[A-Za-z_]", unquoted):
            return False
    try:
        _ENV.parse(text)
    except TemplateSyntaxError:
        return False
    return True


def import_template(text: str, mode: TemplateMode, source: str = "prompt") -> ImportedTemplate:
    """The operating document ``text`` as an instructions template (module docstring). Raises
    :class:`TemplateImportError` naming ``source``, the line and the syntax when it cannot."""
    if mode == "none":
        if not re.search(r"\{[{%#]", text):
            return ImportedTemplate(text=text)
        if re.search(r"\{%-?\s*endraw", text):
            raise TemplateImportError(
                f"{source}: the prompt contains {{% endraw %}}; it cannot be kept verbatim")
        return ImportedTemplate(text="{% raw %}" + text + "{% endraw %}",
                                notes=["--template none: the prompt is kept verbatim, {{ }} included"])
    from jinja2 import TemplateSyntaxError, meta

    from callbench.bundle.render import _ENV, _compiled

    if _is_jinja(text):
        names = sorted(meta.find_undeclared_variables(_ENV.parse(text)) - BUILTIN - set(_ENV.globals))
        variables = {n: f"[{n}]" for n in names}
        notes = [f"variable {n} declared with default {d!r} (a scenario may set it)"
                 for n, d in variables.items()]
        return ImportedTemplate(text=text, variables=variables, notes=notes)
    tr = _Translator(text, source)
    out = tr.run()

    try:
        _compiled(out)
    except TemplateSyntaxError as e:
        raise TemplateImportError(
            f"{source} line {e.lineno}: {e.message} (after translating the prompt's Liquid templates); "
            "import it with --template none to keep it verbatim"
        ) from None
    for name, default in sorted(tr.variables.items()):
        tr.notes.append(f"variable {name} declared with default {default!r} (a scenario may set it)")
    return ImportedTemplate(text=out, variables=dict(sorted(tr.variables.items())), notes=tr.notes)
