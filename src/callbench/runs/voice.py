"""The voice channel at run level: refusing unsupported languages at start, building the engines
once, recording them in the manifest and handing each episode its :class:`VoiceLine`.

The voice cache lives in the run folder (``<run>/voice-cache``), so a resumed or replayed run
reads the recogniser's earlier output instead of running it again (:mod:`callbench.sim.voice.pipeline`).
A run whose cache lies beside a shared response cache (``run --cache``) also copies the audio of
its own turns (clean and as the line delivered it) into ``<run>/voice-audio``, laid out as the
cache, so the run folder alone holds what its report plays (docs/decisions.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from callbench.bundle.models import Bundle, Scenario
from callbench.runs.plan import ScenarioFilters, plan_episodes
from callbench.sim.voice.pipeline import AgentSpeechMode
from callbench.sim.voice.setup import ChannelMode, VoiceSettings

if TYPE_CHECKING:
    from callbench.sim.voice.pipeline import VoiceLine


class RunConfig(Protocol):
    """The fields of :class:`callbench.runs.executor.RunConfig` read here."""

    @property
    def candidates(self) -> Any: ...
    @property
    def filters(self) -> ScenarioFilters: ...
    @property
    def channel(self) -> ChannelMode: ...
    @property
    def voice(self) -> VoiceSettings: ...
    @property
    def out(self) -> Path: ...
    @property
    def agent_speech(self) -> AgentSpeechMode: ...


CACHE_FOLDER = "voice-cache"
KEPT_FOLDER = "voice-audio"
"""The run folder's copy of its turns' audio when the voice cache lies elsewhere."""


def _scenarios(config: RunConfig, bundle: Bundle, filters: ScenarioFilters) -> list[Scenario]:
    pairs = [(c.spec, c.settings) for c in config.candidates]
    wanted = {(k.agent_id, k.scenario_id) for k in plan_episodes(bundle, pairs, 1, filters)}
    return [s for aid, agent in bundle.agents.items() for s in agent.scenarios if (aid, s.id) in wanted]


def spoken_scenarios(config: RunConfig, bundle: Bundle) -> list[Scenario]:
    """The run's scenarios that go through the voice channel."""
    from callbench.sim.voice.setup import line_for

    return [s for s in _scenarios(config, bundle, config.filters) if line_for(s, config.channel) is not None]


def prepare_voice(config: RunConfig, bundle: Bundle) -> dict[str, Any] | None:
    """Check and build the run's voice engines before any episode; return the manifest record
    (channel mode, engines with versions and settings) or None when nothing is spoken.

    Raises ``ValueError`` with one line: a scenario language the offline engines lack, or an
    engine that cannot start (missing package, binary, weights or key)."""
    spoken = spoken_scenarios(config, bundle)
    if config.agent_speech != "off" and (config.channel == "text" or not spoken):
        raise ValueError(
            f"--agent-speech {config.agent_speech} speaks the agent's side of the voice channel, and no "
            "scenario of this run goes through it: add --channel audio (or channel.audio in the scenarios)"
        )
    if not spoken:
        return {"channel": config.channel} if config.channel else None
    from callbench.sim.voice.engines import VoiceEngineError
    from callbench.sim.voice.setup import pipeline_for, refuse_languages

    refusal = refuse_languages(spoken, config.channel, config.voice)
    if refusal:
        raise ValueError(refusal)
    try:
        pipe = pipeline_for(config.voice, cache_dir(config), Path(bundle.root))
    except VoiceEngineError as e:
        raise ValueError(f"voice channel: {e}") from None
    record: dict[str, Any] = {
        "channel": config.channel,
        "engines": config.voice.engines,
        "tts": pipe.tts.info.as_dict(),
        "asr": pipe.asr.info.as_dict(),
        "spoken_scenarios": len(spoken),
    }
    if config.agent_speech != "off":  # absent when off, so a run made before the option resumes
        record["agent_speech"] = config.agent_speech
    return record


def cache_dir(config: RunConfig) -> Path:
    """``voice.cache_dir`` when set (beside a shared response cache, so runs in other folders that
    replay it hear the same transcripts), else ``<run>/voice-cache``."""
    return config.voice.cache_dir or config.out / CACHE_FOLDER


def keep_dir(config: RunConfig) -> Path | None:
    """``<run>/voice-audio`` when the voice cache is not the run folder's own, else None."""
    own = config.out / CACHE_FOLDER
    return None if cache_dir(config).resolve() == own.resolve() else config.out / KEPT_FOLDER


def voice_for(scenario: Scenario, config: RunConfig, bundle: Bundle) -> VoiceLine | None:
    """The episode's voice line (None: text channel)."""
    from callbench.sim.voice.setup import line_for, voice_line

    if line_for(scenario, config.channel) is None:
        return None
    return voice_line(scenario, config.channel, config.voice, cache_dir(config), Path(bundle.root),
                      agent=config.agent_speech, keep_dir=keep_dir(config))


def voice_differences(old: dict[str, Any] | None, new: dict[str, Any] | None) -> str | None:
    """One line naming what differs between two manifests' voice records (None: they are equal),
    for the refusal of a resume: each differing value by its dotted path, old then new
    (``voice channel: agent_speech 'line' vs 'tts'; asr.settings.model 'tiny.en' vs 'base'``);
    a record that is None (text only) reads as empty, a missing key as ``absent``."""
    if old == new:
        return None
    found: list[str] = []
    _differ(old or {}, new or {}, "", found)
    return "voice channel: " + ("; ".join(found) or f"{old} vs {new}")


def _differ(a: dict[str, Any], b: dict[str, Any], prefix: str, found: list[str]) -> None:
    for key in sorted(set(a) | set(b)):
        x, y, path = a.get(key, _ABSENT), b.get(key, _ABSENT), f"{prefix}{key}"
        if isinstance(x, dict) and isinstance(y, dict):
            _differ(x, y, f"{path}.", found)
        elif x != y:
            found.append(f"{path} {_shown(x)} vs {_shown(y)}")


_ABSENT = object()


def _shown(value: object) -> str:
    return "absent" if value is _ABSENT else repr(value)
