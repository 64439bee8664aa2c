"""``deployed:`` specs: parsing, clear errors, and the registry's candidate-only rule."""

from __future__ import annotations

import pytest

from callbench.models.base import ModelSettings
from callbench.models.deployed.generic import HttpDeployed
from callbench.models.registry import create_client
from callbench.models.specs import parse_spec


def test_specs_parse_and_keep_their_target() -> None:
    assert parse_spec("deployed:http:http://127.0.0.1:8700/agent") == (
        "deployed",
        "http:http://127.0.0.1:8700/agent",
    )
    assert parse_spec("deployed:vapi:asst_9") == ("deployed", "vapi:asst_9")
    client = create_client("deployed:http:http://127.0.0.1:8700", ModelSettings(), role="candidate")
    assert isinstance(client, HttpDeployed) and client.base == "http://127.0.0.1:8700"
    assert client.adapter == "http"
    ws = create_client("deployed:ws:ws://127.0.0.1:8700/ws", ModelSettings(), role="candidate")
    assert ws.adapter == "ws" and ws.url == "ws://127.0.0.1:8700/ws"  # type: ignore[attr-defined]
    lk = create_client("deployed:livekit:my_bot.agent:make", ModelSettings(), role="candidate")
    assert lk.adapter == "livekit" and lk.target == "my_bot.agent:make"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("deployed:bland:x", "unknown deployed adapter 'bland'"),
        ("deployed:vapi:", "needs a target"),
        ("deployed:http:ftp://host/x", "expected an http:// or https:// URL"),
        ("deployed:http:https://host/agent?key=abc", "may hold no user, password or query"),
        ("deployed:http:https://user:pw@host/agent", "may hold no user, password or query"),
        ("deployed:ws:http://host/agent", "expected a ws:// or wss:// URL"),
        ("deployed:ws:wss://host/agent?token=abc", "may hold no user, password or query"),
        ("deployed:livekit:my_bot", "expected deployed:livekit:<module or path.py>:<factory>"),
    ],
)
def test_bad_specs_are_refused_with_the_spec_named(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        parse_spec(spec)
    assert spec in str(err.value)


def test_a_deployed_agent_is_only_a_candidate() -> None:
    with pytest.raises(ValueError, match="can only be a candidate, not the caller"):
        create_client("deployed:http:http://127.0.0.1:1", ModelSettings(), role="caller")
