"""The benchmark audits itself, as a stage of its own.

- :mod:`~callbench.audit.core`: ``callbench audit``: reference replay, the null and gaming floors,
  leaks, channel events reached.
- :mod:`~callbench.audit.leaks`: hidden values written where the candidate reads them.
- :mod:`~callbench.audit.judges`: the judges graded on traces whose right labels are known.
- :mod:`~callbench.audit.store`: saved judge validations, and which one fits a run.
"""
