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
    ``task_judge``, ``conversation_judge``. Raises ``ValueError`` naming every role whose client
    cannot be made, one line each (``caller anthropic:...: set ANTHROPIC_API_KEY ...``): a user
    with no keys set learns every key the run needs at once, not one per attempt."""
    from callbench.models.registry import create_client

    roles: list[tuple[str, RoleSpec, Role]] = [
        (f"candidate:{candidate_slug(c.spec, c.settings)}", c, "candidate") for c in config.candidates
    ]
    roles.append(("caller", config.caller, "caller"))
    if config.grade:
        roles += [("task_judge", config.task_judge, "task_judge"),
                  ("conversation_judge", config.conversation_judge, "conversation_judge")]
    clients: dict[str, ModelClient] = {}
    errors: list[str] = []
    for key, role, name in roles:
        try:
            clients[key] = create_client(role.spec, role.settings, bundle=bundle, cache=cache, role=name)
        except ValueError as e:
            errors.append(f"{name.replace('_', ' ')}: {e}")
    if errors:
        raise ValueError("\n".join(errors) if len(errors) == 1 else
                         f"{len(errors)} role(s) cannot start:\n" + "\n".join(f"  {e}" for e in errors))
    return clients
