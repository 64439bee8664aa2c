"""Remote voice engines against a loopback fake of the OpenAI audio API."""

from __future__ import annotations

import numpy as np
import pytest
from tests.fakes.openai_audio_server import OpenAIAudioServer

from callbench.sim.voice.engines import VoiceEngineError
from callbench.sim.voice.line import Audio
from callbench.sim.voice.remote import RemoteASR, RemoteTTS

SECRET = "sk-test-secret-123"


def _audio() -> Audio:
    return Audio((0.1 * np.sin(np.arange(16000) / 5)).astype(np.float32), 16000)


def test_speech_request_and_wav_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICE_KEY", SECRET)
    with OpenAIAudioServer() as srv:
        tts = RemoteTTS(srv.base_url, model="tts-1", voice="alloy", api_key_env="VOICE_KEY")
        audio = tts.synthesize("Hello there", "hi-IN")
        req = srv.requests[0]
    assert audio.rate == 16000 and len(audio.samples) == 8000
    assert req["path"] == "/v1/audio/speech"
    assert req["body"] == {
        "model": "tts-1",
        "input": "Hello there",
        "voice": "alloy",
        "response_format": "wav",
    }
    assert req["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in repr(tts.info.as_dict())


def test_transcription_sends_language_and_temperature_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICE_KEY", SECRET)
    with OpenAIAudioServer(transcript=" my account is 4 8 2 1 5 ") as srv:
        asr = RemoteASR(srv.base_url, model="whisper-1", api_key_env="VOICE_KEY")
        rec = asr.transcribe(_audio(), "ta-IN")
        body = srv.requests[0]["body"]
    assert rec.text == "my account is 4 8 2 1 5" and not rec.truncated
    assert body["model"] == b"whisper-1" and body["language"] == b"ta" and body["temperature"] == b"0"
    assert body["file"][:4] == b"RIFF" and len(body["file"]) == 44 + 2 * 16000


def test_a_5xx_is_retried_once_then_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OpenAIAudioServer(fail_first=1) as srv:
        rec = RemoteASR(srv.base_url, model="m", api_key_env=None, retry_after_s=0).transcribe(_audio(), "en")
        assert rec.text and len(srv.requests) == 2
    with OpenAIAudioServer(fail_first=2) as srv, pytest.raises(VoiceEngineError, match="HTTP 500"):
        RemoteASR(srv.base_url, model="m", api_key_env=None, retry_after_s=0).transcribe(_audio(), "en")


def test_missing_key_and_bad_answers_are_clear_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    with OpenAIAudioServer(bad_json=True) as srv:
        with pytest.raises(VoiceEngineError, match=r"needs \$NO_SUCH_KEY"):
            RemoteASR(srv.base_url, model="m", api_key_env="NO_SUCH_KEY").transcribe(_audio(), "en")
        with pytest.raises(VoiceEngineError, match="without a JSON 'text' field"):
            RemoteASR(srv.base_url, model="m", api_key_env=None).transcribe(_audio(), "en")
