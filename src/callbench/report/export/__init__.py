"""The report as files for other programs: the typed report as JSON and one CSV row per planned
call (:mod:`.json_csv`). Reads :mod:`callbench.report.model` only, never the terminal or HTML
report."""
