"""Work bounds for the instructions sandbox beyond ``range``, ``*`` and ``**`` (loader.py): calls and
filters whose size arguments would build a huge string before the rendered-size check could stop
it, and the template line of a render error.

A function or method call (``'x'.center(n)``, ``lipsum(n)``) or a filter (``|center(n)``,
``|indent(n)``, ``|truncate(n)``) with an integer argument over ``limit`` is refused, and so is one
whose result is a string, list or tuple longer than ``limit``. ``replace``, ``join`` and a string
``indent`` can multiply sizes without a large integer, so their result size is computed from
their inputs first (:func:`estimated_size`). Formatting with ``%`` or ``str.format`` refuses a
field width or precision over ``limit``. Refusals raise jinja2's ``SecurityError`` (a
``TemplateError``), so validate reports them as ``prompt.render`` problems.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

from jinja2.exceptions import SecurityError

_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(\d*)(?:\.(\d+))?")
_NUMBERS = re.compile(r"\d+")


def _too_big(v: Any, limit: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and abs(v) > limit


def check_args(name: str, args: Iterable[Any], limit: int) -> None:
    """Raise ``SecurityError`` when an integer in ``args`` is over ``limit``."""
    if any(_too_big(a, limit) for a in args):
        raise SecurityError(f"{name}(): a size argument over {limit:,} is not allowed in instructions")


def check_result(name: str, result: Any, limit: int) -> Any:
    """``result``, or ``SecurityError`` when it is a string, list or tuple longer than ``limit``."""
    if isinstance(result, str | list | tuple) and len(result) > limit:
        raise SecurityError(f"{name}(): a result over {limit:,} items is not allowed in instructions")
    return result


def check_percent_format(fmt: str, limit: int) -> None:
    """Refuse ``%`` conversions in ``fmt`` whose width or precision is over ``limit``."""
    for m in _PERCENT_SPEC.finditer(fmt):
        if any(g and int(g) > limit for g in m.groups()):
            raise SecurityError(f"a format width over {limit:,} is not allowed in instructions")


def check_brace_format(fmt: str, limit: int) -> None:
    """Refuse ``str.format`` fields in ``fmt`` whose format spec holds a number over ``limit``."""
    try:
        fields = list(string.Formatter().parse(fmt))
    except ValueError:
        return  # a malformed format string fails on its own when formatted
    for _, _, spec, _ in fields:
        if spec and any(int(n) > limit for n in _NUMBERS.findall(spec)):
            raise SecurityError(f"a format width over {limit:,} is not allowed in instructions")


def estimated_size(name: str, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """Result length of ``replace`` / ``join`` / ``indent`` (string width) from their inputs, so a
    multiplied size is refused before it is built; 0 for any other operation."""
    if name == "replace" and isinstance(value, str) and len(args) >= 2:
        old, new = str(args[0]), str(args[1])
        return len(value) + (value.count(old) if old else len(value) + 1) * max(0, len(new) - len(old))
    if name == "join":
        items = list(value) if isinstance(value, list | tuple) else []
        sep = args[0] if args else kwargs.get("d", "")
        return sum(len(x) if isinstance(x, str) else 20 for x in items) + len(str(sep)) * len(items)
    if name == "indent" and isinstance(value, str):
        width = args[0] if args else kwargs.get("width", 4)
        if isinstance(width, str):
            return len(value) + (value.count("\n") + 1) * len(width)
    return 0


def bounded_call(obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any], limit: int) -> None:
    """Checks before a sandboxed call of ``obj`` (a function or a bound method)."""
    name = getattr(obj, "__name__", type(obj).__name__)
    check_args(name, (*args, *kwargs.values()), limit)
    owner = getattr(obj, "__self__", None)
    if isinstance(owner, str):
        if name in ("format", "format_map"):
            check_brace_format(owner, limit)
        elif name == "join" and args:
            if estimated_size("join", args[0], (owner,), {}) > limit:
                raise SecurityError(
                    f"join(): a result over {limit:,} characters is not allowed"
                )
        elif estimated_size(name, owner, args, kwargs) > limit:
            raise SecurityError(
                f"{name}(): a result over {limit:,} characters is not allowed"
            )


def bounded_filter(name: str, f: Callable[..., Any], limit: int) -> Callable[..., Any]:
    """``f`` (a jinja2 filter) wrapped with the checks above; jinja's ``pass_context`` /
    ``pass_eval_context`` / ``pass_environment`` marker is kept (it is copied with the function's
    attributes), and the value filtered is never size-checked, only the arguments."""
    skip = 1 if hasattr(f, "jinja_pass_arg") else 0

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        value, rest = (args[skip], args[skip + 1 :]) if len(args) > skip else (None, ())
        check_args(name, (*rest, *kwargs.values()), limit)
        if name == "format" and isinstance(value, str):
            check_percent_format(value, limit)
        if estimated_size(name, value, rest, kwargs) > limit:
            raise SecurityError(f"{name}: a result over {limit:,} characters is not allowed")
        return check_result(name, f(*args, **kwargs), limit)

    return wrapped


def template_line(tb: TracebackType | None) -> int | None:
    """The template line of the innermost template frame of a render error's traceback (jinja2
    rewrites tracebacks so template frames carry template line numbers), or None."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
