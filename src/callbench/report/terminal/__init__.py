"""The terminal report (rich tables that fit the terminal's width): the main report
(:mod:`.tables`), its per-run sections (:mod:`.sections`), ``callbench audit``'s and
``callbench agreement``'s tables (:mod:`.audit`, :mod:`.agreement`) and the width rules they all
print through (:mod:`.fit`). Reads :mod:`callbench.report.model` only, never the HTML report or
the exports."""
