"""Reports over run folders: load (typed records, clear file errors), fairness checks, the
typed :class:`~callbench.report.build.Report`, terminal tables, one offline HTML file with a
trace viewer, and JSON/CSV exports. ``callbench report`` is a thin wrapper over these modules."""
