"""Shared helpers of the end-to-end tests."""

from __future__ import annotations

import importlib.util
import os

import pytest

REQUIRE_LOCAL_ENV = "CALLBENCH_REQUIRE_LOCAL"
SERVER_MODULES = ("uvicorn", "fastapi", "sse_starlette")
"""What llama-cpp-python's ``[server]`` extra installs (``callbench serve-local`` needs it)."""


def local_model_missing(*extra: tuple[str, bool], server: bool = False) -> str:
    """Why the embedded-model tests cannot run here, or ``""``: llama-cpp-python not installed,
    its ``[server]`` extra missing (when ``server``), the 0.5B weights not installed, or the first
    ``(why, missing)`` pair of ``extra`` whose ``missing`` is true."""
    from callbench.models.local.weights import VARIANTS, find_parts

    checks = [("llama-cpp-python is not installed", lambda: importlib.util.find_spec("llama_cpp") is None)]
    if server:
        checks.append(("llama-cpp-python's [server] extra is not installed",
                       lambda: any(importlib.util.find_spec(m) is None for m in SERVER_MODULES)))
    checks.append(("the 0.5B weights (callbench[local]) are not installed",
                   lambda: find_parts(VARIANTS["0.5b"]) is None))
    for why, gone in checks:
        if gone():
            return why
    return next((why for why, gone in extra if gone), "")


def require_local_model(*extra: tuple[str, bool], server: bool = False) -> None:
    """At a test module's top: skip the whole module when :func:`local_model_missing` says why,
    or fail it when ``CALLBENCH_REQUIRE_LOCAL=1`` (CI's ``[local]`` job, where a skip would hide a
    broken install)."""
    why = local_model_missing(*extra, server=server)
    if why and os.environ.get(REQUIRE_LOCAL_ENV) == "1":
        pytest.fail(f"{REQUIRE_LOCAL_ENV}=1 but {why}", pytrace=False)
    if why:
        pytest.skip(why, allow_module_level=True)
