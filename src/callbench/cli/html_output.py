"""Where ``callbench report`` writes its HTML report: one file up to
:data:`~callbench.report.html.folder.SINGLE_FILE_MAX_CALLS` calls, else a folder (docs/report.md),
and the fallback beside a read-only run folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from callbench.cli.output_paths import OutputProblem

if TYPE_CHECKING:
    from callbench.report.html.folder import FolderBuild


@dataclass
class HtmlTarget:
    """Where and how the HTML report is written: ``path`` (a file, or a folder when ``folder``),
    ``named`` when the user gave the path, and why it is a folder (shown on its page)."""

    path: Path
    named: bool
    folder: bool
    reason: str
    include_traces: bool

    def page(self, path: Path) -> Path:
        """The page to open: ``path`` itself, or ``path/index.html`` for a folder."""
        return path / "index.html" if self.folder else path

    def problem(self, option: str) -> OutputProblem | None:
        """Why the named target cannot be written, as one line located at ``option`` (``--html`` or
        ``--html-folder``), or None; checked before the report is computed. A file target may
        not be a folder; a folder target must be one the folder report may replace
        (``report.html_folder``'s own refusal rules, unchanged); either must be creatable
        (:func:`callbench.cli.output_paths.creatable_problem`)."""
        from callbench.cli.output_paths import creatable_problem, file_path_problem

        if not self.folder:
            return file_path_problem(option, self.path,
                                     folder_hint="a folder report is written with --html-folder DIR")
        from callbench.report.html.folder import ReportFolderError
        from callbench.report.html.folder import _check_target as check_folder_target

        try:
            check_folder_target(self.path.absolute())
        except ReportFolderError as e:
            return OutputProblem(f"{option} {e}")
        return creatable_problem(option, self.path)

    def start(self, runs: list | None, budget_s: float) -> FolderBuild | None:
        """For a folder: start writing its calls in the background (the report's worker processes,
        :func:`callbench.report.html.folder.start_html_folder`) while the statistics are computed;
        None for a file, or when the folder's place cannot be written now (the calls are then
        written by :meth:`write`, which also tries the fallback place). With ``runs`` None the
        calls are handed to the build while the run is read (``FolderBuild.take``). ``budget_s``:
        the report's latency budget (seconds), marked on each call's latency strip; the report
        later given to :meth:`write` must have the same."""
        from callbench.report.html.folder import ReportFolderError, start_html_folder

        if not self.folder:
            return None
        try:
            return start_html_folder(self.path, runs=runs, background=runs is not None, budget_s=budget_s)
        except (OSError, ReportFolderError):
            return None

    def write(self, result: object, runs: list, path: Path, build: object | None = None) -> None:
        """Write the report at ``path`` (raises OSError, or ReportFolderError for a folder path
        that is a file or a folder not made by a report); ``build``: the folder's calls started by
        :meth:`start` (used once)."""
        from callbench.report.html.folder import FolderBuild, write_html_folder
        from callbench.report.html.page import write_html

        if self.folder and isinstance(build, FolderBuild):
            build.finish(result, path, reason=self.reason)  # type: ignore[arg-type]
        elif self.folder:
            write_html_folder(result, None, path, reason=self.reason, runs=runs)  # type: ignore[arg-type]
        else:
            write_html(result, runs, path, include_traces=self.include_traces)  # type: ignore[arg-type]


def html_target(
    runs: list | None, run_dir: Path, html: Path | None, html_folder: Path | None, *, include_traces: bool,
    n_calls: int | None = None,
) -> HtmlTarget:
    """One file up to SINGLE_FILE_MAX_CALLS calls (or without traces), else a folder: the one
    asked for, ``--html`` without its ``.html`` suffix, or ``RUN_DIR/report``. The calls are
    counted from ``runs`` unless ``n_calls`` gives their number."""
    from callbench.report.html.folder import SINGLE_FILE_MAX_CALLS
    from callbench.report.html.viewer import call_count

    if html_folder is not None:
        return HtmlTarget(html_folder, True, True, "asked for with --html-folder", True)
    n = (n_calls if n_calls is not None else call_count(runs or [])) if include_traces else 0
    if n <= SINGLE_FILE_MAX_CALLS:
        return HtmlTarget(html or run_dir / "report.html", html is not None, False, "", include_traces)
    reason = f"{n:,} calls, more than the {SINGLE_FILE_MAX_CALLS:,} one file holds"
    if html is None:
        return HtmlTarget(run_dir / "report", False, True, reason, True)
    folder = html.with_suffix("") if html.suffix.lower() in (".html", ".htm") else html
    typer.echo(f"note: {reason}: the HTML report is the folder {folder} (open {folder / 'index.html'})",
               err=True)
    return HtmlTarget(folder, True, True, reason, True)


def write_default_html(result: object, runs: list, target: HtmlTarget, build: object | None = None) -> None:
    """The default HTML report: ``RUN_DIR/report.html`` (or the folder ``RUN_DIR/report``), else
    beside the run folder (``<RUN_DIR>.report.html`` or ``<RUN_DIR>.report``) when the folder
    cannot be written (a read-only run folder); when neither can be written, one
    warning line names both and the command still succeeds (the terminal report was shown; the
    HTML was not asked for by name)."""
    first = target.path
    beside = first.parent.parent / f"{first.parent.name}.{first.name}"
    reasons: list[str] = []
    for path in (first, beside):
        started, build = build, None  # used once: finished or failed, its files are gone
        try:
            target.write(result, runs, path, started)
        except OSError as e:
            reasons.append(f"{path}: {(e.strerror or str(e)).lower()}")
            continue
        typer.echo(f"HTML report: {target.page(path).resolve().as_uri()}")
        return
    typer.echo(f"warning: no HTML report written ({'; '.join(reasons)}); give --html PATH in a writable "
               "folder, or --no-html", err=True)
