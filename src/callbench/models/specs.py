"""Model spec strings: ``<provider>[:<model>]``.

Providers (DESIGN.md "models/"):

- ``openai:<model>``: OpenAI or any OpenAI-compatible server (vLLM, Ollama, OpenRouter, llama.cpp
  server) through ``settings.base_url`` or the SDK's own ``OPENAI_BASE_URL``.
- ``anthropic:<model>``: the Anthropic Messages API with native tool use.
- ``local``, ``local:0.5b``, ``local:1.5b``, ``local:0.5b-q4_0``, ``local:<path.gguf>``: the
  embedded llama.cpp model
  (DESIGN.md "Embedded default model"); bare ``local`` picks the 1.5B weights when installed.
- ``scripted:<name>``: deterministic test models (written in ``scripted.py`` / ``scripted_judge.py``).
- ``deployed:http:<URL>``, ``deployed:ws:<URL>``, ``deployed:vapi:<assistant id>``,
  ``deployed:retell:<agent id>``, ``deployed:livekit:<module or file.py>:<factory>``: a deployed
  agent driven over its own interface, candidates only (``models/deployed/``, ``docs/deployed.md``).
"""

from __future__ import annotations

from typing import Literal, get_args

Provider = Literal["openai", "anthropic", "local", "scripted", "deployed"]
PROVIDERS: tuple[str, ...] = get_args(Provider)


def parse_spec(spec: str) -> tuple[str, str]:
    """Split a spec into ``(provider, model)``.

    ``model`` is everything after the first colon (so ``local:/models/a:b.gguf`` and
    ``openai:ft:gpt-4o:org::id`` keep their colons) and ``""`` for a bare ``local``.
    Raises ValueError naming the spec for an empty spec, an unknown provider, or a provider that
    needs a model name (``openai``, ``anthropic``, ``scripted``) given without one.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"model spec {spec!r} is empty; expected <provider>:<model>, e.g. openai:gpt-4o")
    spec = spec.strip()
    provider, _, model = spec.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if provider not in PROVIDERS:
        raise ValueError(
            f"model spec {spec!r}: unknown provider {provider!r}; expected one of "
            + ", ".join(f"{p}:" for p in PROVIDERS)
        )
    if provider != "local" and not model:
        raise ValueError(f"model spec {spec!r}: provider {provider!r} needs a model name after the colon")
    if provider == "deployed":
        from callbench.models.deployed import split_deployed

        split_deployed(spec, model)
    return provider, model
