"""The generator model's settings file (``callbench generate --settings FILE``).

YAML: either a mapping of settings (``temperature``, ``top_p``, ``top_k``, ``seed``, ``max_tokens``,
``reasoning_effort``, ``base_url``, ``extra_headers``, ``timeout_s``, ``max_attempts``,
``retry_base_delay_s``, ``n_ctx``; as for run roles, ``models/base.ModelSettings``) or the same under a
``generator:`` key, optionally with ``spec`` (which must then equal ``--model``). Keys never go here
(credential headers must be ``env:VAR``).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from callbench.models.base import ModelSettings


def load_generator_settings(path: Path, spec: str) -> ModelSettings:
    """Settings from ``path`` (shape in the module docstring). Raises ValueError naming the file
    and field for an unreadable file, an unknown setting, a bad value or a ``spec`` other than
    ``spec``."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ValueError(f"{path}: cannot read model settings: {e}") from None
    if isinstance(data, dict) and isinstance(data.get("generator"), dict | str):
        data = data["generator"]
    if isinstance(data, str):
        data = {"spec": data}
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of settings (or generator: {{...}})")
    data = dict(data)
    given = data.pop("spec", None)
    if given is not None and given != spec:
        raise ValueError(f"{path}: spec {given!r} is not the --model {spec!r}")
    try:
        return ModelSettings.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise ValueError(f"{path}: {loc}: {first['msg']}") from None
