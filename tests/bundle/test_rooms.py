"""The rooms of ``callbench.bundle``, checked on its import graph (read with ``ast``, so every import
statement counts: module level, inside functions, under ``TYPE_CHECKING``; relative imports are
resolved against the importing module).

Rooms:

* **core**: the modules directly in ``bundle/`` (models, matchers, loading, rendering, hashing,
  provenance, fixtures, checks, sections, coverage, inspection, schema export).
* **state/**: stateful backends. ``state.models`` (the typed spec an ``agent.yaml`` declares) and
  ``state.store`` (records, the tables' hash that enters the content hash, the failure of an
  operation) are part of the bundle's data; ``state.engine``, ``state.builtin_ops`` and
  ``state.check`` run calls and grade them, above the core.
* **validate/**: the static audits and their helpers, above everything else in ``bundle/``.
* the **facade** ``callbench/bundle/__init__.py``: re-exports the public names for library users,
  importing each on first use (PEP 562). It imports upward on purpose (``load_bundle`` lives in
  ``validate.audits``), so no module of the package may import the facade itself (only its
  submodules): that keeps the facade outside every circle.

Rules (each a test below):

1. No import circle between the modules of ``bundle/``.
2. Nothing outside ``validate/`` imports ``validate/`` (the loader loads and collects problems, it
   does not audit; the validator sits above it).
3. The core imports from ``state/`` only ``state.models`` and ``state.store``; those two import from
   the core only its leaf modules (ones that import nothing of ``bundle/``), so the spec stays a
   plain data module that the engine, the built-ins and the state checks build on.
4. ``bundle/`` imports nothing of callbench outside itself except ``callbench.oserror`` and the
   package root ``callbench`` (which holds process flags and imports nothing): the bundle is the
   bottom stage, it knows no engine, provider, grader or command line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from import_cycles import strongly_connected

SRC = Path(__file__).resolve().parents[2] / "src"
BUNDLE = SRC / "callbench" / "bundle"
FACADE = "callbench.bundle"
ALLOWED_OUTSIDE = {"callbench", "callbench.oserror"}
CORE_MAY_IMPORT_FROM_STATE = {"callbench.bundle.state", "callbench.bundle.state.models",
                              "callbench.bundle.state.store"}


def module_name(path: Path, src: Path) -> str:
    """Dotted module name of ``path`` (a ``.py`` file under ``src``); a package's ``__init__.py``
    is the package."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """Every module that ``source`` (module ``module``) imports, at any depth of the syntax tree.
    ``from X import Y`` counts as an import of ``X.Y`` when that is a module in ``known``, else of
    ``X``. Relative imports are resolved as Python does (a package's level 1 is the package)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in known else target)
    return out


def import_graph(src: Path = SRC, package: Path = BUNDLE) -> dict[str, set[str]]:
    """Module -> every callbench module it imports, for each module of ``package``."""
    files = {module_name(p, src): p for p in sorted(package.rglob("*.py"))}
    known = set(files)
    return {m: {i for i in imports_of(p.read_text(encoding="utf-8"), m, p.name == "__init__.py", known)
                if i == "callbench" or i.startswith("callbench.")}
            for m, p in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module, or a module importing itself
    (Tarjan's algorithm), each sorted; edges to modules outside ``graph`` are ignored."""
    return strongly_connected(graph)


def room(module: str) -> str:
    """``facade``, ``validate``, ``state`` or ``core`` for a module of ``callbench.bundle``."""
    if module == FACADE:
        return "facade"
    for sub in ("validate", "state"):
        if module == f"{FACADE}.{sub}" or module.startswith(f"{FACADE}.{sub}."):
            return sub
    return "core"


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def _in_bundle(graph: dict[str, set[str]], m: str) -> set[str]:
    return {i for i in graph[m] if i in graph}


# ------------------------------------------------------------------ the checker itself


def test_imports_of_sees_deferred_relative_and_type_checking_imports() -> None:
    known = {"p", "p.a", "p.b", "p.sub", "p.sub.c", "p.sub.d"}
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.b import X\n"
              "def f():\n    from . import d\n    from ..a import Y\n    import json\n")
    assert imports_of(source, "p.sub.c", False, known) == {"typing", "p.b", "p.sub.d", "p.a", "json"}
    # in a package's __init__, level 1 is the package itself
    assert imports_of("from .c import Z\n", "p.sub", True, known) == {"p.sub.c"}


def test_cycles_finds_a_circle_through_three_modules_and_nothing_in_a_chain() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set(), "x": {"a", "outside"}}) == []
    assert cycles({"a": {"a"}}) == [["a"]]


# ------------------------------------------------------------------ the rules


def test_the_graph_covers_the_rooms(graph: dict[str, set[str]]) -> None:
    rooms = {room(m) for m in graph}
    assert rooms == {"facade", "core", "state", "validate"}
    assert "callbench.bundle.validate.audits" in graph and "callbench.bundle.state.engine" in graph
    # the loader reads state tables and hashes them with the store's hash, and nothing of validate/
    assert "callbench.bundle.state.store" in graph["callbench.bundle.loader"]


def test_no_import_circle_inside_bundle(graph: dict[str, set[str]]) -> None:
    assert cycles(graph) == []


def test_no_module_imports_the_facade(graph: dict[str, set[str]]) -> None:
    assert [m for m in graph if FACADE in graph[m]] == []


def test_only_validate_imports_validate(graph: dict[str, set[str]]) -> None:
    upward = sorted((m, i) for m in graph if room(m) not in ("validate", "facade")
                    for i in _in_bundle(graph, m) if room(i) == "validate")
    assert upward == []


def test_the_core_imports_only_the_state_spec_and_store(graph: dict[str, set[str]]) -> None:
    upward = sorted((m, i) for m in graph if room(m) == "core" for i in _in_bundle(graph, m)
                    if room(i) == "state" and i not in CORE_MAY_IMPORT_FROM_STATE)
    assert upward == []


def test_the_state_spec_and_store_import_only_core_leaves(graph: dict[str, set[str]]) -> None:
    leaves = {m for m in graph if room(m) == "core" and not _in_bundle(graph, m)}
    assert "callbench.bundle.matchers" in leaves
    tangled = sorted((m, i) for m in CORE_MAY_IMPORT_FROM_STATE
                     for i in _in_bundle(graph, m) if room(i) == "core" and i not in leaves)
    assert tangled == []


def test_bundle_imports_nothing_of_callbench_outside_itself(graph: dict[str, set[str]]) -> None:
    outside = sorted((m, i) for m in graph for i in graph[m]
                     if i not in graph and i not in ALLOWED_OUTSIDE)
    assert outside == []
