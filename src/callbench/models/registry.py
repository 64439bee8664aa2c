"""Creating a ModelClient from a spec string and settings, and reading role settings from YAML.

Specs (``specs.py``): ``openai:<model>``, ``anthropic:<model>``, ``local``, ``local:0.5b``,
``local:1.5b``, ``local:<variant>-q4_0`` (requantised copy, ``requantize.py``),
``local:<path.gguf>``, ``scripted:<name>``, ``deployed:<adapter>:<target>`` (a deployed agent,
candidates only: ``models/deployed/``). Every error names the spec.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from callbench.models.base import ModelClient, ModelSettings, Role
from callbench.models.cache import CachedClient, CacheMode, ResponseCache
from callbench.models.specs import parse_spec

ROLES: tuple[str, ...] = ("candidate", "caller", "task_judge", "conversation_judge")
JUDGE_ROLES = frozenset({"task_judge", "conversation_judge"})


def _is_judge_script(spec: str, role: str | None) -> bool:
    from callbench.models.scripted.judge import SCRIPTED_JUDGE_PREFIXES

    if spec.startswith("scripted:file:"):
        return role in JUDGE_ROLES
    return any(spec == p or (p.endswith(":") and spec.startswith(p)) for p in SCRIPTED_JUDGE_PREFIXES)


def _create_local(spec: str, model: str, settings: ModelSettings) -> ModelClient:
    from callbench.models.local.client import LocalClient, llama_available
    from callbench.models.local.requantize import QUANT_TYPES, ensure_requantized
    from callbench.models.local.weights import VARIANTS, check_gguf, default_variant, ensure_weights

    if not llama_available():
        from callbench.models.local.extra import install_hint

        raise ValueError(f"{spec}: the local provider needs llama-cpp-python: {install_hint('local')}")
    if model in ("", *VARIANTS):
        variant = model or default_variant()
        return LocalClient(spec, settings, model_path=ensure_weights(variant),
                           model_name=VARIANTS[variant].description, embedded=True)
    variant, _, quant = model.partition("-")
    if variant in VARIANTS and quant in QUANT_TYPES:
        return LocalClient(spec, settings, model_path=ensure_requantized(variant, quant),
                           model_name=f"{VARIANTS[variant].description} requantized to {quant.upper()}",
                           embedded=True)
    if model.endswith(".gguf") or "/" in model:
        path = check_gguf(Path(model))
        return LocalClient(spec, settings, model_path=path, model_name=path.name, embedded=False)
    raise ValueError(f"model spec {spec!r}: expected local, local:0.5b, local:1.5b, local:0.5b-q4_0, "
                     "local:1.5b-q4_0 or local:<path to a .gguf file>")


def create_client(
    spec: str,
    settings: ModelSettings | None = None,
    *,
    bundle: Any = None,
    cache: ResponseCache | None = None,
    role: Role | None = None,
    http_client: Any = None,
) -> ModelClient:
    """A ModelClient for ``spec`` with ``settings``.

    ``bundle`` is passed to scripted models that replay a scenario; ``cache`` wraps the client in
    a :class:`CachedClient` (not for scripted models, which are deterministic already); ``role``
    tells a ``scripted:file:`` judge script from a dialogue script; ``http_client`` (an
    ``httpx2.AsyncClient``) is injected into the OpenAI/Anthropic SDKs (tests).
    Raises ValueError naming the spec for an unknown provider or model, a missing key
    (``OPENAI_API_KEY``/``ANTHROPIC_API_KEY``), missing llama-cpp-python or weights.
    """
    settings = settings or ModelSettings()
    provider, model = parse_spec(spec)
    client: ModelClient
    if provider == "scripted":
        if _is_judge_script(spec, role):
            from callbench.models.scripted.judge import create_scripted_judge

            return create_scripted_judge(spec, settings)
        from callbench.models.scripted.models import create_scripted

        return create_scripted(spec, settings, bundle, role=role)
    if provider == "deployed":
        if role not in (None, "candidate"):
            raise ValueError(f"{spec}: a deployed agent can only be a candidate, not the {role}")
        from callbench.models.deployed import create_deployed

        return create_deployed(spec, model, settings)  # never cached: the agent's tools run live
    if provider == "openai":
        from callbench.models.remote.openai_client import OpenAIClient

        client = OpenAIClient(spec, settings, http_client=http_client)
    elif provider == "anthropic":
        from callbench.models.remote.anthropic_client import AnthropicClient

        client = AnthropicClient(spec, settings, http_client=http_client)
    else:
        client = _create_local(spec, model, settings)
    if cache is not None and cache.mode is not CacheMode.OFF:
        return CachedClient(client, cache)
    return client


def _role_entry(value: Any, where: str) -> tuple[str, ModelSettings]:
    if isinstance(value, str):
        value = {"spec": value}
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a spec string or a mapping with 'spec' and settings")
    data = dict(value)
    spec = data.pop("spec", None)
    if not isinstance(spec, str):
        raise ValueError(f"{where}.spec: missing or not a string")
    try:
        parse_spec(spec)
        settings = ModelSettings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{where}.{loc}: {first['msg']}") from None
    except ValueError as exc:
        raise ValueError(f"{where}.spec: {exc}") from None
    return spec, settings


def load_settings_file(path: Path | str) -> dict[str, tuple[str, ModelSettings]]:
    """Read a YAML file mapping roles to a spec and its settings.

    Each of ``candidate``, ``caller``, ``task_judge``, ``conversation_judge`` (all optional) is a
    spec string or a mapping ``{spec: ..., temperature: ..., top_p: ..., top_k: ..., seed: ...,
    max_tokens: ..., reasoning_effort: ..., base_url: ..., extra_headers: {...}, timeout_s: ...,
    n_ctx: ..., tool_choice: ..., structured_output: ..., parse_content_tool_calls: ...}``.
    Keys never go here (``extra_headers`` credentials must be ``env:VAR``).
    Raises ValueError naming the file and field for an unreadable file, an unknown role, a bad
    spec or setting.
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        from callbench.oserror import os_error_line

        line = os_error_line(exc, path, expected="a YAML file of per-role settings")
        raise ValueError(f"--settings {line}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: cannot read model settings: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of roles ({', '.join(ROLES)})")
    out: dict[str, tuple[str, ModelSettings]] = {}
    for role, value in data.items():
        if role not in ROLES:
            raise ValueError(f"{path}: unknown role {role!r}; expected one of {', '.join(ROLES)}")
        out[role] = _role_entry(value, f"{path}: {role}")
    return out


def settings_from_pairs(pairs: list[str], base: ModelSettings | None = None) -> ModelSettings:
    """Settings from CLI-style ``name=value`` pairs (values read as YAML scalars, so
    ``temperature=0.7``, ``seed=3``, ``base_url=http://localhost:8000/v1``), over ``base``.
    ``extra_headers.<Name>=value`` sets one header. Raises ValueError naming the bad pair."""
    base = base or ModelSettings()
    data = base.model_dump()
    data["extra_headers"] = dict(base.extra_headers)  # a dump holds markers, not the values
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"model setting {pair!r}: expected name=value, e.g. temperature=0.7")
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            value = raw
        if name.startswith("extra_headers."):
            data["extra_headers"] = {**data["extra_headers"], name.split(".", 1)[1]: raw}
        elif name in ModelSettings.model_fields:
            data[name] = raw if name in ("base_url", "reasoning_effort") else value
        else:
            raise ValueError(f"model setting {pair!r}: unknown setting {name!r}; expected one of "
                             + ", ".join(ModelSettings.model_fields))
    try:
        return ModelSettings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"model setting {loc}: {first['msg']}") from None
