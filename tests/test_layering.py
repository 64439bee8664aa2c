"""The package's layering, checked from its import graph (docs: DESIGN.md, "Layout").

Every ``import`` and ``from ... import`` statement of every file under ``src/callbench`` counts,
wherever it stands: at the top, inside a function (a deferred import), under ``if TYPE_CHECKING:``;
relative imports are resolved against the importing module, and a string literal given to
``importlib.import_module`` counts as an import of that module. ``from pkg import name`` is an
import of ``pkg.name`` when that is a module, else of ``pkg``; ``import a.b.c`` is an import of the
longest module prefix of ``a.b.c`` that exists.

Two rules:

1. Stages. Every module belongs to a stage, named by its first component under ``callbench``
   (:data:`STAGES`, lowest first); no module imports a module of a higher stage. Modules of one
   stage may import each other.
2. No circles. No two modules import each other, directly or through others (a strongly connected
   component of more than one module), except the circles listed in :data:`KNOWN_CYCLES`, which
   are being taken apart; an entry that no longer holds a circle fails the test, so it gets removed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import callbench
from import_cycles import strongly_connected

PACKAGE = "callbench"

STAGES: tuple[frozenset[str], ...] = (
    # Helpers every stage may use: the package's own __init__ (the version), OSError wording, and
    # reading a file of either form a run folder holds (gzip or plain), which the trace model needs.
    frozenset({"", "oserror", "textfile"}),
    # The typed bundle: knows no engine, provider or grader.
    frozenset({"bundle"}),
    # Model clients: their requests are built from bundle types (tool schemas, settings).
    frozenset({"models"}),
    # The trace model. DESIGN draws the data flow as bundle -> sim -> trace, but the trace is the
    # contract the simulator writes, so in imports it sits below sim: sim imports trace.
    frozenset({"trace"}),
    # The episode loop, caller, channel and backend.
    frozenset({"sim"}),
    # The run folder's format and storage, read by every stage above it.
    frozenset({"runfolder"}),
    # Grading reads run folders, never the executor.
    frozenset({"grade"}),
    frozenset({"stats"}),
    # The audit replays reference paths (sim) and grades them; the report shows its results.
    frozenset({"audit"}),
    frozenset({"report"}),
    # Orchestration sits above everything it runs (sim, grade) and reports (report).
    frozenset({"runs"}),
    # Generation checks the bundles it writes by running them (runs, audit).
    frozenset({"generate"}),
    frozenset({"importers"}),
    # Shipped example bundles: data, no code above the helpers.
    frozenset({"examples"}),
    frozenset({"cli"}),
    frozenset({"__main__"}),
)
"""The stages, lowest first, each a set of first components under ``callbench`` (``""`` is the
package's ``__init__``)."""

KNOWN_CYCLES: tuple[frozenset[str], ...] = ()
"""Circles other work is taking apart right now. A circle found must lie inside one entry; an entry
inside which no circle is found any more is stale and fails the test (remove it)."""


@dataclass(frozen=True)
class Import:
    """One import statement's target: ``module`` imports ``target`` at ``file``:``line``."""

    module: str
    target: str
    file: Path
    line: int

    def where(self) -> str:
        return f"{self.file}:{self.line}: {self.module} imports {self.target}"


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package folder ``root`` (named ``package``) by dotted name; a
    package's ``__init__.py`` is the package's own name."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _existing(name: str, modules: Iterable[str]) -> str | None:
    """The longest prefix of the dotted ``name`` that is a module, or None (outside the package)."""
    known = set(modules)
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """The imports of ``module`` (file ``path``) into the package whose modules are ``modules``;
    imports of other packages are left out."""
    is_package = path.name == "__init__.py"
    own_package = module if is_package else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Import] = []

    def add(name: str, line: int) -> None:
        target = _existing(name, modules)
        if target is not None and target != module:
            found.append(Import(module, target, path, line))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = own_package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                add(sub if sub in modules else source, node.lineno)
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and not arg.value.startswith("."):
                add(arg.value, node.lineno)
    return found


def _is_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id == "import_module"
    )


def import_graph(root: Path, package: str) -> list[Import]:
    """Every import between modules of the package folder ``root``, by module, then line; one
    entry per (module, target, line) however many names the statement imports."""
    modules = module_files(root, package)
    found = [imp for m, p in modules.items() for imp in imports_of(m, p, modules)]
    return sorted(set(found), key=lambda i: (i.module, i.line, i.target))


def stage_of(module: str, package: str, stages: tuple[frozenset[str], ...]) -> int | None:
    """The index in ``stages`` of ``module``'s first component under ``package``, or None."""
    first = module.removeprefix(package).lstrip(".").split(".")[0]
    for i, names in enumerate(stages):
        if first in names:
            return i
    return None


def layering_problems(imports: list[Import], package: str, stages: tuple[frozenset[str], ...]) -> list[str]:
    """One line per module without a stage and per import of a higher stage, naming file and line."""
    problems: list[str] = []
    for imp in imports:
        low, high = stage_of(imp.module, package, stages), stage_of(imp.target, package, stages)
        if low is None or high is None:
            problems.append(f"{imp.where()}: no stage declared for "
                            f"{imp.module if low is None else imp.target} (add it to STAGES)")
        elif high > low:
            problems.append(f"{imp.where()}: upward import (stage {low} {'/'.join(sorted(stages[low]))} "
                            f"imports stage {high} {'/'.join(sorted(stages[high]))})")
    return problems


def cycles(imports: list[Import]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        graph.setdefault(imp.module, set()).add(imp.target)
        graph.setdefault(imp.target, set())
    return [frozenset(c) for c in strongly_connected(graph) if len(c) > 1]


def cycle_problems(imports: list[Import], known: tuple[frozenset[str], ...]) -> list[str]:
    """One entry per circle outside ``known`` (with the imports that close it, file and line) and
    per entry of ``known`` inside which no circle is left."""
    problems: list[str] = []
    found = cycles(imports)
    for comp in found:
        if any(comp <= k for k in known):
            continue
        inside = [imp.where() for imp in imports if imp.module in comp and imp.target in comp]
        problems.append(f"import circle between {', '.join(sorted(comp))}:\n    " + "\n    ".join(inside))
    for k in known:
        if not any(comp <= k for comp in found):
            problems.append(f"KNOWN_CYCLES entry {sorted(k)} holds no circle any more: remove it")
    return problems


SRC = Path(callbench.__file__).parent


def test_no_import_of_a_higher_stage() -> None:
    problems = layering_problems(import_graph(SRC, PACKAGE), PACKAGE, STAGES)
    assert not problems, "imports against the layering:\n" + "\n".join(problems)


def test_no_import_circle() -> None:
    problems = cycle_problems(import_graph(SRC, PACKAGE), KNOWN_CYCLES)
    assert not problems, "\n".join(problems)


def test_every_package_has_a_stage() -> None:
    firsts = {m.removeprefix(PACKAGE).lstrip(".").split(".")[0] for m in module_files(SRC, PACKAGE)}
    assert {f for f in firsts if stage_of(f"{PACKAGE}.{f}", PACKAGE, STAGES) is None} == set()
    assert stage_of("callbench.runfolder.store", PACKAGE, STAGES) == 5  # below grade, above sim


def test_the_run_folder_reads_nothing_above_the_trace() -> None:
    imports = import_graph(SRC, PACKAGE)
    targets = {i.target.split(".")[1] if "." in i.target else "" for i in imports
               if i.module.startswith("callbench.runfolder")}
    assert targets <= {"", "bundle", "models", "trace", "textfile", "runfolder"}, targets


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_checker_finds_an_upward_import_and_a_circle(tmp_path: Path) -> None:
    root = _write(tmp_path / "pkg", {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/a.py": "def f():\n    from ..high import b  # deferred, relative\n    return b\n",
        "low/c.py": "import importlib\nimportlib.import_module('pkg.low.d')\n",
        "low/d.py": "from pkg.low import c\n",
        "high/__init__.py": "",
        "high/b.py": "from pkg.low.a import f\nimport os\n",
    })
    stages = (frozenset({""}), frozenset({"low"}), frozenset({"high"}))
    imports = import_graph(root, "pkg")
    assert {(i.module, i.target, i.line) for i in imports} == {
        ("pkg.low.a", "pkg.high.b", 2),
        ("pkg.low.c", "pkg.low.d", 2),
        ("pkg.low.d", "pkg.low.c", 1),
        ("pkg.high.b", "pkg.low.a", 1),
    }
    problems = layering_problems(imports, "pkg", stages)
    assert problems == [
        f"{root / 'low/a.py'}:2: pkg.low.a imports pkg.high.b: "
        "upward import (stage 1 low imports stage 2 high)"
    ]
    assert cycles(imports) == [frozenset({"pkg.high.b", "pkg.low.a"}), frozenset({"pkg.low.c", "pkg.low.d"})]
    known = (frozenset({"pkg.low.c", "pkg.low.d"}), frozenset({"pkg.gone.x", "pkg.gone.y"}))
    found = cycle_problems(imports, known)
    assert len(found) == 2
    assert found[0].startswith("import circle between pkg.high.b, pkg.low.a:")
    assert f"{root / 'high/b.py'}:1: pkg.high.b imports pkg.low.a" in found[0]
    assert found[1] == "KNOWN_CYCLES entry ['pkg.gone.x', 'pkg.gone.y'] holds no circle any more: remove it"


def test_a_module_without_a_stage_is_reported(tmp_path: Path) -> None:
    root = _write(tmp_path / "pkg", {"__init__.py": "", "new/__init__.py": "from pkg import low\n",
                                     "low.py": ""})
    problems = layering_problems(import_graph(root, "pkg"), "pkg", (frozenset({"", "low"}),))
    assert problems == [f"{root / 'new/__init__.py'}:1: pkg.new imports pkg.low: no stage declared for "
                        "pkg.new (add it to STAGES)"]
