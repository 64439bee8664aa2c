"""What the OpenAI and Anthropic adapters share: retries, error classification, timing, cost.

A subclass implements ``_send(request) -> ModelResponse`` (one HTTP request, usage without cost);
:meth:`RemoteClient.complete` wraps it in retries (``retry.py``), maps SDK errors to
:class:`InfrastructureError` with every secret redacted, measures latency and tokens per second
(the generation speed when the adapter's server reports its timing, else output tokens over the
request's wall time),
prices the call (``pricing.py``) and checks JSON output of ``response_schema`` requests
(``output.py``: ModelOutputError, not retried here).

Every request, retry and fault is noted in the current task's fault ledger (``faults.py``) under
the request's role. A completion with no content and no tool calls (``empty_reply``) is retried
once; when the second is empty too, it is a :class:`ModelOutputError` of kind ``empty_reply``
(recorded and graded for a candidate, a rejected turn for the caller, a judge error for a judge),
never silent speech.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from pydantic import ValidationError

from callbench.models.base import (
    InfrastructureError,
    ModelOutputError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
)
from callbench.models.faults import note_fault, note_reading, note_request, note_retry
from callbench.models.output import check_json_output
from callbench.models.pricing import PriceTable, call_cost
from callbench.models.remote.retry import RetryPolicy, Sleep, call_with_retries, classify_exception
from callbench.models.remote.secrets import Redactor
from callbench.models.timing import AttemptTiming, ResponseTiming, end_attempt, start_attempt

EMPTY_REPLY_ATTEMPTS = 2
"""An empty completion is retried once."""


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
        self.retry_policy = retry_policy or RetryPolicy(
            max_attempts=settings.max_attempts, base_delay_s=settings.retry_base_delay_s)
        self._sleep = sleep
        self._rng = rng or random.Random(settings.seed if settings.seed is not None else 0)
        self._price_table = price_table
        self.custom_endpoint = False

    async def _send(self, request: ModelRequest) -> ModelResponse:  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_reply(self, request: ModelRequest, response: ModelResponse) -> ModelResponse:
        """A subclass's last look at a reply (usage complete): may rewrite it or raise
        ModelOutputError. The default returns it unchanged."""
        return response

    async def _attempt(self, request: ModelRequest, empties: list[int]) -> ModelResponse:
        role = request.context.role
        start = time.perf_counter()
        note_request(role)
        try:
            response = await self._send(request)
        except InfrastructureError as err:
            err = InfrastructureError(self.redactor.clean(str(err)), retryable=err.retryable,
                                      status=err.status, retry_after_s=err.retry_after_s, kind=err.kind,
                                      role=role)
            note_fault(role, err.kind)
            raise err from None
        except ValidationError as exc:
            # a field the adapter read had a shape no completion has (the body checks in
            # anomalies.py catch the known ones first): the provider's fault, never a traceback
            first = exc.errors()[0] if exc.errors() else None
            where = ".".join(str(p) for p in first["loc"]) if first else "?"
            bad = InfrastructureError(self.redactor.clean(
                f"{self.provider} {role}: malformed_body: the response could not be read as a "
                f"completion ({exc.title}.{where}: {first['msg'] if first else exc})"),
                retryable=True, kind="malformed_body", role=role)
            note_fault(role, bad.kind)
            raise bad from None
        except Exception as exc:
            mapped = classify_exception(exc, provider=self.provider, redactor=self.redactor, role=role)
            if mapped is None:
                raise
            note_fault(role, mapped.kind)
            mapped.role = role
            raise mapped from None
        elapsed = time.perf_counter() - start
        if response.usage.input_tokens == 0 and response.usage.output_tokens == 0:
            # no request has zero prompt tokens: the server sent no usage (read as 0)
            note_reading(role, "usage_missing")
        speed = response.usage.tokens_per_second  # set by _send when the server timed generation
        usage = response.usage.model_copy(update={
            "calls": 1,
            "latency_s": elapsed,
            "tokens_per_second": speed if speed is not None else (
                (response.usage.output_tokens / elapsed) if elapsed > 0 else None),
        })
        usage.cost_usd = call_cost(self.spec, usage, custom_endpoint=self.custom_endpoint,
                                   table=self._price_table)
        response = self._check_reply(request, response.model_copy(update={"usage": usage}))
        if not (response.content or "").strip() and not response.tool_calls:
            note_fault(role, "empty_reply")
            empties.append(1)
            if len(empties) >= EMPTY_REPLY_ATTEMPTS:
                raise ModelOutputError(
                    f"empty_reply: {self.spec} returned no content and no tool calls "
                    f"({len(empties)} times; an empty completion is retried once)", raw=None, usage=usage,
                    kind="empty_reply")
            raise InfrastructureError(f"{self.provider} {role}: empty_reply: no content and no tool calls",
                                      retryable=True, kind="empty_reply", role=role)
        if request.response_schema is not None:
            check_json_output(response.content, request.response_schema, usage=usage)
        if response.usage is not usage:  # _check_reply made a reply of its own usage
            response = response.model_copy(update={"usage": usage})
        return response

    async def _timed_attempt(self, request: ModelRequest, empties: list[int], attempts: list[AttemptTiming],
                             origin: list[float], streamed: list[bool]) -> ModelResponse:
        """:meth:`_attempt` with its timings appended to ``attempts`` (relative to ``origin[0]``, the
        first attempt's send, set by the first attempt); ``streamed[0]`` is whether it streamed."""
        clock, token = start_attempt()
        if not origin:
            origin.append(clock.sent)
        fault: str | None = None
        try:
            return await self._attempt(request, empties)
        except (InfrastructureError, ModelOutputError) as err:
            fault = err.kind
            raise
        finally:
            end = time.perf_counter()
            end_attempt(token)
            attempts.append(clock.timing(origin[0], end, fault))
            streamed[0] = clock.streamed

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` with retries. Raises InfrastructureError (retries exhausted or not
        retryable) or ModelOutputError (unusable output; not retried here; its ``timing`` set).
        The response's ``timing`` holds every attempt's timings (``models/timing.py``)."""
        empties: list[int] = []
        attempts: list[AttemptTiming] = []
        origin: list[float] = []
        streamed = [False]
        role = request.context.role
        try:
            response = await call_with_retries(
                lambda: self._timed_attempt(request, empties, attempts, origin, streamed),
                policy=self.retry_policy, rng=self._rng, sleep=self._sleep, what=f"{self.spec} ({role})",
                on_retry=lambda err, wait_s: note_retry(role, err.kind, wait_s))
        except ModelOutputError as err:
            err.timing = ResponseTiming(attempts=attempts, streamed=streamed[0])
            raise
        return response.model_copy(update={"timing": ResponseTiming(attempts=attempts, streamed=streamed[0])})

    async def aclose(self) -> None:
        client: Any = getattr(self, "_client", None)
        if client is not None:
            await client.close()
