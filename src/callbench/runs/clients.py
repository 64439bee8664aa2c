"""The clients of a run's roles, built from its specs: shared by the in-process executor
(:mod:`callbench.runs.session`) and the Ray workers (:mod:`callbench.runs.ray_executor`), which
both sit above it.
"""

from __future__ import annotations

from callbench.bundle.models import Bundle
from callbench.models.base import ModelClient, Role
from callbench.models.cache import ResponseCache
from callbench.runs.executor import RoleSpec, RunConfig
from callbench.runs.plan import candidate_slug


def build_clients(
    config: RunConfig, bundle: Bundle, cache: ResponseCache | None = None
) -> dict[str, ModelClient]:
    """Create one client per role: ``candidate:<slug>`` for each candidate, ``caller``,
    ``task_judge``, ``conversation_judge``. Raises ``ValueError`` naming a bad spec."""
    from callbench.models.registry import create_client

    def make(role: RoleSpec, name: Role) -> ModelClient:
        return create_client(role.spec, role.settings, bundle=bundle, cache=cache, role=name)

    clients = {
        f"candidate:{candidate_slug(c.spec, c.settings)}": make(c, "candidate") for c in config.candidates
    }
    clients["caller"] = make(config.caller, "caller")
    if config.grade:
        clients["task_judge"] = make(config.task_judge, "task_judge")
        clients["conversation_judge"] = make(config.conversation_judge, "conversation_judge")
    return clients
