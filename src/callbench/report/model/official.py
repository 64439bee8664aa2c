"""Whether the report may call a run official: its manifest says so (``RunManifest.official``,
decided when the run finished: every planned call finished, none skipped, one callbench version, a
clean git checkout, no generated scenario awaiting review) *and* what the manifest vouches for is
still on disk: every planned call that finished still has its trace file. A trace deleted or lost
after the run (the manifest still counts it as completed) leaves a result that cannot be
re-graded or checked, so the run is not official and the report names the calls.
"""

from __future__ import annotations

from callbench.report.model.load import RunData

SHOWN_IDS = 5
"""How many missing episode ids the terminal report names before "(+N more)"."""
HTML_SHOWN_IDS = 10
"""How many the HTML report's runs table names (it has the room; the JSON lists them all)."""


def missing_traces(run: RunData) -> list[str]:
    """The planned episodes of ``run`` that have no trace file (episode ids, plan order) when more
    are missing than the manifest says never ran (planned - completed - skipped): some finished
    call lost its trace. Empty otherwise: an unfinished run simply has calls still to run (which
    of the missing ones were lost cannot be told apart from the files alone, so all are named)."""
    m = run.manifest
    missing = [k.episode_id for k in m.planned if k.episode_id not in run.trace_files]
    never_run = max(0, len(m.planned) - m.completed - m.skipped)
    return missing if len(missing) > never_run else []


def run_is_official(run: RunData) -> bool:
    """``run``'s manifest says official and no planned call lost its trace file."""
    return run.manifest.official and not missing_traces(run)


def missing_traces_text(ids: list[str], shown_ids: int = SHOWN_IDS) -> str:
    """``"2 planned calls have no trace file: e1, e2"``, naming the first ``shown_ids`` ids and then
    ``"(+N more)"``; empty for no ids."""
    if not ids:
        return ""
    more = len(ids) - shown_ids
    shown = ", ".join(ids[:shown_ids]) + (f" (+{more} more)" if more > 0 else "")
    calls = "1 planned call has" if len(ids) == 1 else f"{len(ids)} planned calls have"
    return f"{calls} no trace file: {shown}"
