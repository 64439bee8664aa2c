"""Deterministic models for tests and reference replays (``scripted:...`` specs).

Modules: :mod:`.models` (reference candidate, plan caller, hang-up and talk-only candidates), :mod:`.judge`
(scripted judges ``scripted:met`` ...), :mod:`.script` (replies from a script file). The public
names are re-exported here.
"""

from callbench.models.scripted.judge import ScriptedJudge, create_scripted_judge
from callbench.models.scripted.models import (
    HangupCandidate,
    PlanCaller,
    ReferenceCandidate,
    TalkCandidate,
    create_scripted,
)
from callbench.models.scripted.script import ScriptedFileModel, load_script

__all__ = [
    "HangupCandidate",
    "PlanCaller",
    "ReferenceCandidate",
    "ScriptedFileModel",
    "ScriptedJudge",
    "TalkCandidate",
    "create_scripted",
    "create_scripted_judge",
    "load_script",
]
