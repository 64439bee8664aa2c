"""What the OpenAI and Anthropic adapters share: retries, error classification, timing, cost.

A subclass implements ``_send(request) -> ModelResponse`` (one HTTP request, usage without cost);
:meth:`RemoteClient.complete` wraps it in retries (``retry.py``), maps SDK errors to
:class:`InfrastructureError` with every secret redacted, measures latency and tokens per second,
prices the call (``pricing.py``) and checks JSON output of ``response_schema`` requests
(``output.py``: ModelOutputError, not retried here).
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from callbench.models.base import ModelRequest, ModelResponse, ModelSettings
from callbench.models.output import check_json_output
from callbench.models.pricing import PriceTable, call_cost
from callbench.models.retry import RetryPolicy, Sleep, call_with_retries, classify_exception
from callbench.models.secrets import Redactor


class RemoteClient:
    """Base of the HTTP providers. ``embedded_smoke_test_model`` is always False here."""

    provider = "remote"
    embedded_smoke_test_model = False

    def __init__(
        self,
        spec: str,
        settings: ModelSettings,
        *,
        retry_policy: RetryPolicy | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        price_table: PriceTable | None = None,
    ) -> None:
        self.spec = spec
        self.settings = settings
        self.redactor = Redactor()
        self.retry_policy = retry_policy or RetryPolicy()
        self._sleep = sleep
        self._rng = rng or random.Random(settings.seed if settings.seed is not None else 0)
        self._price_table = price_table
        self.custom_endpoint = False

    async def _send(self, request: ModelRequest) -> ModelResponse:  # pragma: no cover - abstract
        raise NotImplementedError

    async def _attempt(self, request: ModelRequest) -> ModelResponse:
        start = time.perf_counter()
        try:
            response = await self._send(request)
        except Exception as exc:
            mapped = classify_exception(exc, provider=self.provider, redactor=self.redactor)
            if mapped is None:
                raise
            raise mapped from None
        elapsed = time.perf_counter() - start
        usage = response.usage.model_copy(update={
            "calls": 1,
            "latency_s": elapsed,
            "tokens_per_second": (response.usage.output_tokens / elapsed) if elapsed > 0 else None,
        })
        usage.cost_usd = call_cost(self.spec, usage, custom_endpoint=self.custom_endpoint,
                                   table=self._price_table)
        if request.response_schema is not None:
            check_json_output(response.content, request.response_schema, usage=usage)
        return response.model_copy(update={"usage": usage})

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` with retries. Raises InfrastructureError (retries exhausted or not
        retryable) or ModelOutputError (unusable output; not retried here)."""
        return await call_with_retries(lambda: self._attempt(request), policy=self.retry_policy,
                                       rng=self._rng, sleep=self._sleep, what=self.spec)

    async def aclose(self) -> None:
        client: Any = getattr(self, "_client", None)
        if client is not None:
            await client.close()
