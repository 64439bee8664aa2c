"""Models reached over the network: the OpenAI and Anthropic adapters with what they share.

- :mod:`~callbench.models.remote.client`: :class:`RemoteClient`: retries, error classification,
  timing, cost.
- :mod:`~callbench.models.remote.openai_client`, :mod:`~callbench.models.remote.anthropic_client`:
  the two wire formats.
- :mod:`~callbench.models.remote.prepared`: the lean request path shared by the SDK adapters.
- :mod:`~callbench.models.remote.negotiation`: what an OpenAI-compatible server accepts.
- :mod:`~callbench.models.remote.schemas`: tool and output schemas cleaned for a provider.
- :mod:`~callbench.models.remote.anomalies`, :mod:`~callbench.models.remote.retry`: untrusted
  responses and retries.
- :mod:`~callbench.models.remote.content_calls`: tool calls written as text.
- :mod:`~callbench.models.remote.secrets`: credentials from the environment, and their redaction.

Beside it: :mod:`callbench.models.local` (the embedded llama.cpp model) and
:mod:`callbench.models.scripted` (deterministic stand-ins).
"""
