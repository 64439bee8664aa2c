"""callbench: an open benchmark harness for LLM phone agents."""

__version__: str
RUNNING_AS_COMMAND = False
"""True in the process that runs a ``callbench`` command (set by ``callbench.__main__``), False when
the CLI app or the library is used in-process: ``bundle/validate/cache.py`` serves only the former
unless ``CALLBENCH_VALIDATE_CACHE`` says otherwise."""
"""The installed distribution's version (``importlib.metadata``), read on first use: importing
``importlib.metadata`` costs tens of milliseconds that every command's start-up (and the
supervising parent's) paid whether or not it printed a version."""


def __getattr__(name: str) -> str:
    """PEP 562: ``callbench.__version__`` (and ``from callbench import __version__``), computed once;
    ``0.0.0+unknown`` from a source tree that is not installed. Raises AttributeError otherwise."""
    if name != "__version__":
        raise AttributeError(f"module 'callbench' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("callbench")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        found = "0.0.0+unknown"
    globals()["__version__"] = found
    return found
