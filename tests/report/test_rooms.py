"""The report package's rooms, read from its import graph (``ast``, no import executed): every
import counts, deferred ones inside functions and ``TYPE_CHECKING`` ones included, relative ones
resolved. ``report/model/`` (the typed report and its assembly) imports no view; the views
``report/terminal/``, ``report/html/`` and ``report/export/`` import the model and never each
other; no import circle anywhere inside ``report/``."""

from __future__ import annotations

import ast
from pathlib import Path

import callbench.report
from import_cycles import strongly_connected

PACKAGE = "callbench.report"
ROOT = Path(callbench.report.__file__).parent
MODEL = "model"
VIEWS = ("terminal", "html", "export")


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module under ``root`` by its dotted name (a package by its ``__init__.py``)."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join([package, *parts])] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``name`` (the module at ``path``) imports anywhere in its
    source: each ``import a.b.c`` and ``from a.b import c`` (``a.b.c`` when that is a module, else
    ``a.b``), with relative imports resolved against the module's package."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".") if is_package else name.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([base] if base else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for target in targets:
            while target and target not in known:  # ``import pkg.mod.attr`` names the module pkg.mod
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """``module -> the modules of the same package it imports``, for every module under ``root``."""
    mods = module_names(root, package)
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: each strongly connected component of more than one module
    (Tarjan's algorithm), sorted."""
    return strongly_connected(graph)


def room(module: str) -> str:
    """The room of a report module: ``model``, ``terminal``, ``html``, ``export``, or ``""`` for
    the package itself."""
    rest = module.removeprefix(PACKAGE).lstrip(".")
    return rest.split(".")[0]


def test_the_scanner_sees_deferred_and_relative_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "low" / "a.py").write_text("def f():\n    from ..up import b\n    return b\n")
    (pkg / "up.py").write_text("from pkg.low.a import f\n")
    (pkg / "low" / "c.py").write_text("from . import a\nimport pkg.up.thing\n")
    graph = import_graph(pkg, "pkg")
    assert graph["pkg.low.a"] == {"pkg.up"}
    assert graph["pkg.up"] == {"pkg.low.a"}
    assert graph["pkg.low.c"] == {"pkg.low.a", "pkg.up"}
    assert cycles(graph) == [["pkg.low.a", "pkg.up"]]


def test_every_report_module_is_in_a_room() -> None:
    loose = [m for m in module_names(ROOT, PACKAGE) if room(m) not in (MODEL, *VIEWS, "")]
    assert loose == [], f"report modules outside model/, terminal/, html/, export/: {loose}"
    assert [m for m in module_names(ROOT, PACKAGE) if room(m) == ""] == [PACKAGE]


def test_no_import_circle_inside_report() -> None:
    graph = import_graph(ROOT, PACKAGE)
    assert len(graph) > 30  # the scan found the package's modules
    assert f"{PACKAGE}.model.build" in graph[f"{PACKAGE}.terminal.tables"]
    assert cycles(graph) == []


def test_the_model_imports_no_view_and_views_not_each_other() -> None:
    graph = import_graph(ROOT, PACKAGE)
    wrong = sorted(
        f"{m} imports {t}"
        for m, targets in graph.items()
        for t in targets
        if room(t) != room(m) and (room(t) in VIEWS or room(t) == "")
    )
    assert wrong == []
    for view in VIEWS:  # each view does read the model (the rule is not met by an empty room)
        assert any(room(t) == MODEL for m, ts in graph.items() if room(m) == view for t in ts), view
