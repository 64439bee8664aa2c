"""The llama-cpp-python library for the embedded model: whether it is installed, importing it with
the thread settings the machine calls for (:mod:`.openmp`), and how many threads generate."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from callbench.models.base import InfrastructureError
from callbench.models.local.extra import install_hint
from callbench.models.local.openmp import import_llama_cpp


def llama_available() -> bool:
    """True when llama-cpp-python is importable (the ``[local]`` extra)."""
    return importlib.util.find_spec("llama_cpp") is not None


def llama_lib() -> Any:
    """The ``llama_cpp`` module, imported for :func:`local_threads` threads; a non-retryable
    InfrastructureError naming the extra to install when it is missing."""
    try:
        llama_cpp = import_llama_cpp(local_threads())
    except ImportError:
        raise InfrastructureError(
            f"the local provider needs llama-cpp-python: {install_hint('local')}", retryable=False
        ) from None
    return llama_cpp


def local_threads() -> int:
    """Generation threads: ``CALLBENCH_LOCAL_THREADS``, else every core (the run executor serializes
    local calls, ``provider_limits = {"local": 1}``). Measured on 2 shared cores with the 1.5B model:
    2 threads generate 8.0 tok/s against 4.7 with llama.cpp's default of half the cores."""
    raw = os.environ.get("CALLBENCH_LOCAL_THREADS", "").strip()
    if raw:
        try:
            return max(1, int(raw))
        except ValueError:
            raise InfrastructureError(
                f"CALLBENCH_LOCAL_THREADS={raw!r} is not a number", retryable=False
            ) from None
    return max(1, os.cpu_count() or 1)
