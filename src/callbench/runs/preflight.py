"""Preflight: one minimal request per distinct role model before the first episode.

A run whose judge key is wrong must not spend its budget on conversations that can never be
scored. Before the first episode, each distinct (spec, settings) of the candidates, the caller and
both judges that reaches a provider over the network (``openai:``, ``anthropic:``) gets one request:

- candidates: a request offering one tool (``preflight_ping``) and asking for it to be called; the
  endpoint must accept the tools and answer with a usable completion (an answer that does not call
  the tool is a note, not a failure: how well a model uses tools is what the run measures; so is
  an answer holding the call as JSON text in ``content``, ``tool_call_in_content``);
- caller and judges: a request for JSON constrained to a one-field schema; the answer must parse
  and validate (structured output works).

Authentication (401/403), an unknown model (404) and any other fault that outlasts the adapter's
retries fail the preflight with one line naming role and spec. A 401/403/404 is asked again up to
``FATAL_TRIES`` times in all (the run's own rule, ``guard.DEFAULT_MAX_CONSECUTIVE``, stops a run
only after that many in a row): a provider that answers one stray 401 on a bad day must not stop
a run that would have worked, while a wrong key or model name fails every time and still stops
the run before any episode, at the cost of two more one-token requests.

Transient faults are retried as an episode's are: the adapter's own retries first
(rate limits, 5xx, timeouts, malformed bodies, one empty reply), then, for an unusable answer
(``ModelOutputError``: two empty replies, JSON that does not validate), the request is asked again
up to ``OUTPUT_TRIES`` times in all, as the caller and the judges ask again for an unusable reply.
Only a fault that persists fails the preflight, and its line names the fault's own kind (an empty
reply is "no answer: empty_reply", not "no structured JSON output"). Every request, retry and fault
of the preflight is counted in a fault ledger that the session saves with the run
(``faults/preflight/``) and the report adds to ``runs[].faults``. Scripted models need no network and
the embedded ``local`` model is checked when it loads, so neither gets a preflight; a response
cache is bypassed (the probe must reach the provider), and a ``replay_only`` run, which promises no
model call, gets none. A deployed candidate (``deployed:``) is checked by opening a session,
asking for its greeting and closing it (:func:`check_deployed`).
"""

from __future__ import annotations

import json
from typing import Any

from callbench.models.base import (
    ChatMessage,
    InfrastructureError,
    ModelClient,
    ModelOutputError,
    ModelRequest,
    RequestContext,
    Role,
    ToolSchema,
)
from callbench.models.deployed.base import DeployedCandidate, SessionInfo, as_deployed
from callbench.models.specs import parse_spec
from callbench.runs.guard import DEFAULT_MAX_CONSECUTIVE, FATAL_STATUS

NETWORK_PROVIDERS = frozenset({"openai", "anthropic"})
FATAL_TRIES = DEFAULT_MAX_CONSECUTIVE
OUTPUT_TRIES = 3
"""Requests in all for an unusable answer (``ModelOutputError``) before it fails the preflight."""
PING = ToolSchema(
    name="preflight_ping",
    description="Confirms the connection. Call it with no arguments.",
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
)
JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}


class PreflightError(Exception):
    """A role failed its preflight; the message is one line naming role and spec."""


def _unwrap(client: Any) -> Any:
    """The client that talks to the provider (below concurrency limits and the response cache)."""
    seen = 0
    while hasattr(client, "inner") and seen < 5:
        client = client.inner
        seen += 1
    return client


def _request(role: Role) -> ModelRequest:
    context = RequestContext(role=role, episode_id="preflight")
    if role == "candidate":
        return ModelRequest(
            messages=[
                ChatMessage(role="system", content="This is a connection check before a benchmark run."),
                ChatMessage(role="user", content="Call the tool preflight_ping now, with no arguments."),
            ],
            tools=[PING],
            context=context,
        )
    return ModelRequest(
        messages=[
            ChatMessage(role="system", content="This is a connection check before a benchmark run."),
            ChatMessage(role="user", content='Reply with the JSON object {"ok": true}.'),
        ],
        response_schema=JSON_SCHEMA,
        response_schema_name="preflight",
        context=context,
    )


def needs_preflight(spec: str) -> bool:
    """True for specs served over the network (see the module docstring)."""
    return parse_spec(spec)[0] in NETWORK_PROVIDERS


async def check_role(role_name: str, role: Role, client: ModelClient) -> str | None:
    """Send the preflight request of ``role`` through ``client``; returns a note when a candidate
    answered without calling the tool (not a failure: a model weak at tool use is what the run
    measures, not a broken role). Raises :class:`PreflightError`."""
    inner = _unwrap(client)
    where = f"preflight: {role_name} {client.spec}"
    fatal = output = 0
    while True:
        try:
            response = await inner.complete(_request(role))
            break
        except InfrastructureError as e:
            fatal += 1
            if e.status not in FATAL_STATUS or fatal >= FATAL_TRIES:
                raise PreflightError(f"{where}: {e}") from None
        except ModelOutputError as e:
            if role == "candidate" and e.kind == "tool_call_in_content":
                return f"{where}: {e}"  # the episodes record it as the candidate's output error
            output += 1
            if output >= OUTPUT_TRIES:
                raise PreflightError(f"{where}: {_output_cause(role, e)} ({output} tries)") from None
    if role == "candidate" and not any(c.name == PING.name for c in response.tool_calls):
        return (f"{where}: the endpoint accepted tools but the model answered without calling "
                "preflight_ping; its tool use is part of what the run measures")
    return None


def _output_cause(role: Role, e: ModelOutputError) -> str:
    """What an unusable answer lacked, by its kind: an empty reply is no answer at all."""
    if e.kind == "empty_reply":
        return f"no answer: {e}"
    what = "structured JSON output" if role != "candidate" else "a usable answer"
    return f"no {what}: {e}"


async def check_deployed(name: str, dep: DeployedCandidate) -> None:
    """A deployed candidate opens a session, answers the start of a call and closes; raises
    :class:`PreflightError` naming the candidate and the platform's fault otherwise. The session
    gets no webhook address: a preflight greeting must not call tools."""
    info = SessionInfo(episode_id="preflight", agent_id="", scenario_id="")
    try:
        session = await dep.open(info)
        try:
            await session.send(None)
        finally:
            await session.close()
    except InfrastructureError as e:
        raise PreflightError(f"preflight: {name} {dep.spec}: {e}") from None


async def preflight(clients: dict[str, ModelClient]) -> list[str]:
    """Check every distinct role model of ``clients`` (keys ``candidate:<slug>``, ``caller``,
    ``task_judge``, ``conversation_judge``) that needs it, in that order; returns the notes of
    :func:`check_role`. A model shared by several roles with the same settings and headers is
    checked once per kind of request (tools or JSON). Raises :class:`PreflightError` at the first
    failure."""
    notes: list[str] = []
    seen: set[tuple[str, str, bool]] = set()
    for name, client in clients.items():
        role: Role = "candidate" if name.startswith("candidate") else name  # type: ignore[assignment]
        dep = as_deployed(client)
        if dep is not None:
            await check_deployed(name, dep)
            continue
        if not needs_preflight(client.spec):
            continue
        headers = json.dumps(sorted(client.settings.extra_headers.items()))
        key = (client.spec, client.settings.model_dump_json() + headers, role == "candidate")
        if key in seen:
            continue
        seen.add(key)
        note = await check_role(name, role, client)
        if note is not None:
            notes.append(note)
    return notes
