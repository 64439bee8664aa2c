"""Reports over run folders, in rooms, one above the other::

    report/model/     the typed Report and its assembly: loading runs (typed records, clear file
                      errors, worker processes), fairness, faults, ledgers, official, judge
                      validation and accuracy, breakdowns, grade-set agreement, shared wording
    report/terminal/  rich tables for the terminal          \\
    report/html/      one offline HTML file or a folder,     > each imports model/, never another
                      trace viewer, charts, fonts, templates  /
    report/export/    JSON and CSV files                    /

``callbench report`` (:mod:`callbench.cli.results`) loads the runs and builds the
:class:`~callbench.report.model.build.Report` with :mod:`callbench.report.model`, then hands it to
each view it was asked for. No module here imports one above its room, and there is no import
circle inside ``report/`` (``tests/report/test_rooms.py``). This package re-exports nothing, so
importing one room does not load the others.
"""
