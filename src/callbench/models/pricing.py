"""Cost per call from a pinned price table (``prices.yaml``).

A price is USD per million tokens. A model with no price has an unknown cost (``None``), shown as
unknown and never as 0; the embedded local model and scripted models cost 0. Sums propagate
unknown (``Usage.__add__``), so an episode or run with one unpriced call has an unknown total.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from callbench.models.base import Usage
from callbench.models.specs import parse_spec

_DATE_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")
FREE_PROVIDERS = frozenset({"local", "scripted"})


class ModelPrice(BaseModel):
    """USD per million tokens; ``cached_input``/``cache_write`` default to the input price."""

    model_config = ConfigDict(extra="forbid")
    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)

    def cost(self, usage: Usage) -> float:
        """USD for ``usage`` (``input_tokens`` includes cached and cache-write tokens)."""
        cached = usage.cached_input_tokens
        written = usage.cache_write_input_tokens
        plain = max(0, usage.input_tokens - cached - written)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        write_rate = self.input if self.cache_write is None else self.cache_write
        micro = (plain * self.input + cached * cached_rate + written * write_rate
                 + usage.output_tokens * self.output)
        return micro / 1_000_000


class PriceTable(BaseModel):
    """The pinned table: ``pinned`` date (ISO), ``source``, prices by model spec."""

    model_config = ConfigDict(extra="forbid")
    pinned: str
    source: str
    models: dict[str, ModelPrice]
    custom_endpoints: dict[str, ModelPrice] = Field(default_factory=dict)

    def lookup(self, spec: str, *, custom_endpoint: bool = False) -> ModelPrice | None:
        """The price of ``spec`` or None. A dated snapshot falls back to its undated alias.
        ``custom_endpoint`` (an ``openai:`` model on a non-OpenAI base URL) looks only in
        ``custom_endpoints``, since the same name elsewhere is not billed at OpenAI's rates."""
        provider, model = parse_spec(spec)
        table = self.custom_endpoints if custom_endpoint else self.models
        for candidate in (f"{provider}:{model}", f"{provider}:{_DATE_SUFFIX.sub('', model)}"):
            if candidate in table:
                return table[candidate]
        return None


def load_price_table(path: Path | None = None) -> PriceTable:
    """Load ``path`` or the packaged ``prices.yaml``. Raises ValueError naming the file and field."""
    if path is None:
        text = resources.files("callbench.models").joinpath("prices.yaml").read_text(encoding="utf-8")
        where = "callbench/models/prices.yaml"
    else:
        text = Path(path).read_text(encoding="utf-8")
        where = str(path)
    data = yaml.safe_load(text)
    try:
        return PriceTable.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{where}: {loc}: {first['msg']}") from None


@functools.cache
def default_price_table() -> PriceTable:
    """The packaged table, loaded once."""
    return load_price_table()


def call_cost(spec: str, usage: Usage, *, custom_endpoint: bool = False,
              table: PriceTable | None = None) -> float | None:
    """USD cost of one call of ``spec`` with ``usage``; 0 for local/scripted; None when unknown."""
    provider, _ = parse_spec(spec)
    if provider in FREE_PROVIDERS:
        return 0.0
    price = (table or default_price_table()).lookup(spec, custom_endpoint=custom_endpoint)
    return None if price is None else price.cost(usage)
