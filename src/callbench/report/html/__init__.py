"""The HTML report: one offline file (:mod:`.page`) or, for large runs, a folder of files
(:mod:`.folder`, its per-call files :mod:`.call_file` written by worker processes in
:mod:`.calls`), the trace viewer's per-episode views (:mod:`.viewer`, :mod:`.call_script`,
:mod:`.textdiff`), the figures and their SVG charts (:mod:`.figures`, :mod:`.charts`), the embedded
fonts (:mod:`.fonts`, data in ``fonts/``) and the Jinja templates and scripts (``templates/``).
Reads :mod:`callbench.report.model` only, never the terminal report or the exports."""
