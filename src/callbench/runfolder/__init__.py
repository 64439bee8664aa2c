"""The run folder's format and storage: the manifest (:mod:`.manifest`), the per-episode trace and
grade files (:mod:`.episode_files`), the index and store (:mod:`.store`), the folder's lock
(:mod:`.lock`) and the provenance of a run (:mod:`.provenance`).

A stage of its own, below the grader: the executor (``callbench.runs``) writes run folders, and
the grader, the audit and the report read them through this package. It imports nothing above
:mod:`callbench.trace` (``tests/test_layering.py`` checks it).
"""
