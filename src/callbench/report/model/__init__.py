"""The bottom room of the report: the typed report and everything it is assembled from.

Reading run folders (:mod:`.load`, one episode at a time in :mod:`.episode_read`, spread over
worker processes by :mod:`.workers`), the checks and ledgers counted on the way
(:mod:`.fairness`, :mod:`.faults`, :mod:`.ledger`, :mod:`.official`, :mod:`.validation`,
:mod:`.judge_accuracy`), the breakdowns and grade-set agreement (:mod:`.breakdowns`,
:mod:`.agreement`), and the typed :class:`~callbench.report.model.build.Report` with its assembly
(:func:`~callbench.report.model.build.build_report`). :mod:`.text` holds the plain wording that
the terminal and the HTML report both show, so that neither view imports the other.

Nothing here imports a view (:mod:`callbench.report.terminal`, :mod:`callbench.report.html`,
:mod:`callbench.report.export`); the views import this. Where the loader must let a view do work
while it reads (the folder report's call files, written as each trace is read), the view hands it
a function (:class:`~callbench.report.model.load.CallFiles`) instead of being imported.
``tests/report/test_rooms.py`` checks the rule from the import graph.
"""
