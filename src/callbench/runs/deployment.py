"""Before any episode of a run with deployed candidates: the deployment must match the bundle.

Where the platform lets us read the deployed configuration
(:meth:`~callbench.models.deployed.base.DeployedCandidate.deployed_config`: Vapi's assistant,
Retell's agent and LLM, a LiveKit bot's agent), its function tools are compared with each agent
of the run's tools by name, by parameter names, by each parameter's JSON type and by the required list; every
difference is one located line, and any difference stops the run (:class:`DeploymentMismatch`).
The SHA-256 of the configuration is kept on the candidate (so each trace records it) and in the
manifest (``deployed_configs``), and a resumed run whose deployment changed is refused. Where it
cannot be read (the generic protocol, a custom-LLM agent) the manifest records None: the tools
were not checked, and the report can say so.
"""

from __future__ import annotations

from typing import Any

from callbench.bundle.models import LoadedAgent
from callbench.models.base import ModelClient, ToolSchema
from callbench.models.deployed.base import as_deployed
from callbench.models.deployed.platform import config_sha256


class DeploymentMismatch(Exception):
    """The deployed agent's tools differ from the bundle's; the message has one line per difference."""


def _props(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties")
    return props if isinstance(props, dict) else {}


def tool_differences(
    where: str, agent_id: str, bundle: list[ToolSchema], deployed: list[ToolSchema]
) -> list[str]:
    """One line per difference between ``bundle`` (the agent's tools) and ``deployed`` tools,
    each starting with ``where`` (the candidate spec) and naming tool and parameter."""
    lines = []
    ours, theirs = {t.name: t for t in bundle}, {t.name: t for t in deployed}
    for name in sorted(set(ours) - set(theirs)):
        lines.append(f"{where}: tool {name!r} of agent {agent_id!r} is not deployed")
    for name in sorted(set(theirs) - set(ours)):
        lines.append(f"{where}: deployed tool {name!r} is not a tool of agent {agent_id!r}")
    for name in sorted(set(ours) & set(theirs)):
        a, b = ours[name].parameters, theirs[name].parameters
        pa, pb = _props(a), _props(b)
        for p in sorted(set(pa) - set(pb)):
            lines.append(f"{where}: tool {name!r}: parameter {p!r} is missing from the deployment")
        for p in sorted(set(pb) - set(pa)):
            lines.append(f"{where}: tool {name!r}: deployed parameter {p!r} is not in the bundle")
        for p in sorted(set(pa) & set(pb)):
            ta = pa[p].get("type") if isinstance(pa[p], dict) else None
            tb = pb[p].get("type") if isinstance(pb[p], dict) else None
            if ta != tb:
                lines.append(
                    f"{where}: tool {name!r}: parameter {p!r} is {tb!r} deployed, {ta!r} in the bundle"
                )
        ra, rb = sorted(a.get("required") or []), sorted(b.get("required") or [])
        if ra != rb:
            lines.append(f"{where}: tool {name!r}: required {rb} deployed, {ra} in the bundle")
    return lines


async def check_deployments(
    clients: dict[str, ModelClient], agents: list[LoadedAgent]
) -> dict[str, str | None]:
    """Check every deployed candidate of ``clients`` against ``agents`` (those the run plays);
    returns spec -> configuration SHA-256 (None: not readable). Raises
    :class:`DeploymentMismatch` listing every difference, or
    :class:`~callbench.models.base.InfrastructureError` when the platform cannot be read."""
    out: dict[str, str | None] = {}
    lines: list[str] = []
    for client in clients.values():
        dep = as_deployed(client)
        if dep is None:
            continue
        config = await dep.deployed_config()
        if config is None:
            out[dep.spec] = None
            continue
        dep.config_sha256 = out[dep.spec] = config_sha256(config)
        deployed = dep.deployed_tools(config)
        if deployed is not None:
            for agent in agents:
                lines += tool_differences(
                    dep.spec,
                    agent.config.id,
                    [
                        ToolSchema(name=t.name, description=t.description, parameters=t.parameters)
                        for t in agent.config.tools
                    ],
                    deployed,
                )
    if lines:
        raise DeploymentMismatch("the deployment does not match the bundle:\n" + "\n".join(lines))
    return out
