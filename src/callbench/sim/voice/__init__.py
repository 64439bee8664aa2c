"""The voice channel: TTS, a phone line model and a recogniser behind one interface
(:mod:`.engines`, :mod:`.remote`, :mod:`.line`, :mod:`.pipeline`; setup in :mod:`.setup`).

Nothing here imports an engine's package at import time: faster-whisper is imported when a
:class:`~.engines.WhisperASR` is built, piper only ever runs as a subprocess."""
