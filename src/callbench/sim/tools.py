"""The candidate's tools as offered (:func:`candidate_tools`): the agent's typed tool interface,
plus the optional ``concluding_message`` argument of call-ending tools that ask for it.

A module of its own so ``callbench validate --providers`` can check the tools as sent without
importing the episode loop (validate's start-up time).
"""

from __future__ import annotations

import copy

from callbench.bundle.models import AgentConfig
from callbench.models.base import ToolSchema

CONCLUDING_MESSAGE = "concluding_message"
CONCLUDING_SCHEMA = {
    "type": "string",
    "description": "Optional. What you say to the caller as you end the call (your goodbye), for when you "
    "cannot speak and call this tool in the same message.",
}


def candidate_tools(agent: AgentConfig) -> list[ToolSchema]:
    """The agent's tools as offered to the candidate. A call-ending tool whose ``concluding_message``
    flag is set gets an optional ``concluding_message`` string property (never required), unless
    the tool already declares one."""
    offer = {c.tool for c in agent.call_ending_tools if c.concluding_message}
    out = []
    for t in agent.tools:
        params = copy.deepcopy(t.parameters)
        if t.name in offer:
            props = params.setdefault("properties", {})
            if isinstance(props, dict) and CONCLUDING_MESSAGE not in props:
                props[CONCLUDING_MESSAGE] = dict(CONCLUDING_SCHEMA)
        out.append(ToolSchema(name=t.name, description=t.description, parameters=params))
    return out
