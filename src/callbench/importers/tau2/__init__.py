"""tau2-bench (sierra-research/tau2-bench) tasks as a callbench bundle: :func:`import_tau2`."""

from callbench.importers.tau2.bundle import ImportSummary, Tau2ImportError, import_tau2

__all__ = ["ImportSummary", "Tau2ImportError", "import_tau2"]
