"""Helpers shared by the command modules: option splitting, role settings, output checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer


def _split(values: list[str]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


ONE_SHOT_GC_THRESHOLD = 10_000
"""First-generation threshold of the cyclic garbage collector in a command that reads a bundle
once and exits (CPython's default is 700)."""


def _one_shot_gc() -> None:
    """Fewer garbage collections in ``validate`` and ``audit``: loading a bundle allocates hundreds
    of thousands of containers that all stay alive (the bundle's data and typed models), which the
    default thresholds scan again and again (about 0.05 s of ``validate`` of the starter).
    Cyclic garbage still gets collected, every 10,000 allocations instead of 700."""
    import gc

    gc.set_threshold(ONE_SHOT_GC_THRESHOLD, *gc.get_threshold()[1:])


def _role_settings(path: Path | None) -> dict[str, tuple[str, object]]:
    if path is None:
        return {}
    from callbench.models.registry import load_settings_file

    try:
        return dict(load_settings_file(path))
    except (OSError, ValueError) as e:
        text = str(e)
        typer.echo(f"error: {text if str(path) in text else f'{path}: {text}'}", err=True)
        raise typer.Exit(2) from None



def _bundle_folder(path: Path) -> None:
    """Exit 2 with one line unless ``path`` is a folder holding ``bundle.yaml`` (DESIGN.md, bundle
    on disk): for commands that would otherwise fail deep inside with a traceback."""
    if not path.exists():
        problem = "no such folder"
    elif not path.is_dir():
        problem = "not a folder; give a bundle folder"
    elif not (path / "bundle.yaml").is_file():
        problem = "not a bundle folder (no bundle.yaml)"
    else:
        return
    typer.echo(f"error: {path}: {problem}", err=True)
    raise typer.Exit(2)


def _output_problem(run_dirs: list[Path], outputs: dict[str, Path | None]) -> str | None:
    """Why the report's output paths cannot be written, or None: two outputs on one path, or a
    path holding a run's own saved data (:func:`callbench.runfolder.manifest.run_owned_path`)."""
    from callbench.runfolder.manifest import run_owned_path

    seen: dict[Path, str] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        key = path.resolve()
        if key in seen:
            return f"{option} and {seen[key]} both write {path}"
        seen[key] = option
        owner = run_owned_path(run_dirs, path)
        if owner is not None:
            return f"{option} {path}: would overwrite the saved data of run {owner}; choose another path"
    return None




def _pass_rule(value: str) -> Any:
    """``--pass-rule`` checked against :data:`callbench.grade.models.PASS_RULES`; exits 2 with one
    line naming the choices otherwise."""
    from callbench.grade.models import PASS_RULES

    if value not in PASS_RULES:
        typer.echo(f"error: --pass-rule {value!r}: use one of {', '.join(PASS_RULES)}", err=True)
        raise typer.Exit(2)
    return value


def _latency_budget(value: str | None) -> float | None:
    """``--latency-budget`` in seconds: ``800ms``, ``0.8s`` or a bare number of milliseconds
    (``800``); None when not given. Exits 2 with one line for anything else, a negative or a
    non-finite value."""
    if value is None:
        return None
    text = value.strip().lower()
    scale, number = (0.001, text[:-2]) if text.endswith("ms") else (1.0, text[:-1]) if text.endswith("s") \
        else (0.001, text)
    try:
        seconds = float(number) * scale
    except ValueError:
        seconds = float("nan")
    if not seconds >= 0.0 or seconds == float("inf"):
        typer.echo(f"error: --latency-budget {value!r}: give a non-negative time such as 800ms or 1.2s",
                   err=True)
        raise typer.Exit(2)
    return seconds


def _report_budget(given: float | None, run_dirs: list[Path]) -> float:
    """The latency budget (seconds) every output of ``callbench report`` uses (terminal, JSON, the
    HTML tables and each call's latency strip, in one file or a folder): ``given``
    (``--latency-budget``), else the first of ``run_dirs`` whose manifest records one
    (``latency_budget_s``, what ``callbench run`` was given), else the documented default
    :data:`~callbench.stats.latency.DEFAULT_LATENCY_BUDGET_S` (docs/latency.md). Only the manifests
    are read, so it is settled before any of a folder report's call files is written (they are
    written while the runs are read). A manifest that cannot be read is passed over here: reading
    the runs names it and stops the report."""
    from callbench.runfolder.manifest import MANIFEST, RunManifest
    from callbench.stats.latency import DEFAULT_LATENCY_BUDGET_S

    if given is not None:
        return given
    for run_dir in run_dirs:
        try:
            recorded = RunManifest.model_validate_json((run_dir / MANIFEST).read_bytes()).latency_budget_s
        except (OSError, ValueError):  # pydantic's ValidationError is a ValueError
            continue
        if recorded is not None:
            return recorded
    return DEFAULT_LATENCY_BUDGET_S
