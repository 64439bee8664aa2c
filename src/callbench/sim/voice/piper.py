"""piper-tts as a long-lived subprocess (piper is GPL: it is run, never imported).

Starting ``python -m piper`` costs about 0.6 CPU-s (Python, onnxruntime, loading the voice),
more than synthesising a short caller turn, so one process serves every turn of a run:
``python -m piper -m <voice.onnx> --output-dir <tmp>`` reads one text per stdin line and writes
one WAV per line, named by a monotonic clock, and logs ``Wrote <path>`` on stderr after closing
the file: a reader thread passes those paths on, so a turn's file is read once it is complete and
then removed. (A *fence* line synthesised after each turn did this before; it cost about 0.1 CPU-s
a turn, a sixth of the synthesis of a nine-turn call.)

Synthesis is deterministic: the voice's two noise draws (``noise_scale``, the generator noise,
and ``noise_w``, the phoneme-duration noise) are random-normal nodes inside the ONNX graph that
onnxruntime draws without a seed, and piper offers no seed, so both scales are set to 0 and every
synthesis of a text is the mean rendition: the same bytes run after run on one machine and
onnxruntime build. With the voice's own scales (0.667 and 0.8) each synthesis differed, and some
renditions of a short turn were unintelligible to the recogniser (one in 24 of "Confirm it is
you." decoded as "and for our mid-suit."), a draw no run seed could reproduce. Variation a run
should have comes from the line, whose draws are seeded.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from callbench.sim.voice.engines import SUBPROCESS_TIMEOUT_S, EngineInfo, VoiceEngineError, primary
from callbench.sim.voice.line import Audio, read_wav

WROTE = "Wrote "  # piper 1.8's log line after a WAV file is closed (logging INFO, on stderr)


def _read_log(stream: IO[bytes], written: queue.Queue[Path | None], tail: collections.deque[str]) -> None:
    """Pass each written WAV's path on, keep the last lines for error messages; None at the end."""
    for raw in stream:
        line = raw.decode("utf-8", "replace").rstrip()
        tail.append(line)
        if WROTE in line:
            written.put(Path(line.split(WROTE, 1)[1]))
    stream.close()
    written.put(None)


class PiperTTS:
    """piper voice ``model`` (a ``.onnx`` with its ``.onnx.json`` beside it) speaking ``language``
    (a primary subtag: ``en`` for ``en_US-joe-medium``). ``noise_scale`` and ``noise_w_scale``
    (default 0: deterministic, see the module's docstring) are passed to piper and recorded in
    ``info.settings``, which keys the audio cache; a nonzero value makes synthesis unseeded
    random. ``length_scale`` (None: the voice's own) stretches phoneme durations. ``fingerprint``:
    record the voice file's SHA-256 (``voice_sha256``; a user's own voice, whose name alone does
    not say which weights it is; the packaged voice is pinned by its verified hash). Raises
    :class:`VoiceEngineError` when piper-tts or the voice files are missing, or the process dies
    or stalls on a turn."""

    def __init__(
        self,
        model: Path,
        *,
        language: str = "en",
        python: str | None = None,
        length_scale: float | None = None,
        noise_scale: float = 0.0,
        noise_w_scale: float = 0.0,
        fingerprint: bool = False,
    ) -> None:
        self.model = Path(model)
        if not self.model.is_file() or not self.model.with_name(self.model.name + ".json").is_file():
            raise VoiceEngineError(
                f"piper voice {self.model}: the .onnx file and its .onnx.json must both exist"
            )
        try:
            import importlib.metadata as md

            ver = md.version("piper-tts")
        except Exception:
            raise VoiceEngineError("piper-tts is not installed: pip install 'callbench[audio]'") from None
        self.python = python or sys.executable
        self.length_scale = length_scale
        self.noise_scale, self.noise_w_scale = float(noise_scale), float(noise_w_scale)
        settings: dict[str, Any] = {
            "voice": self.model.stem,
            "language": language,
            "noise_scale": self.noise_scale,
            "noise_w_scale": self.noise_w_scale,
        }
        if length_scale is not None:
            settings["length_scale"] = length_scale
        if fingerprint:  # a user's voice by its content: another voice under the same name is another engine
            from callbench.sim.voice.weights import content_sha256

            try:
                settings["voice_sha256"] = content_sha256(self.model)
            except OSError as e:
                raise VoiceEngineError(
                    f"piper voice {self.model}: cannot read it: {e.strerror or e}") from None
        self.info = EngineInfo("piper", ver, settings)
        self.languages: frozenset[str] | None = frozenset({primary(language)})
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None
        self._written: queue.Queue[Path | None] = queue.Queue()
        self._tail: collections.deque[str] = collections.deque(maxlen=20)
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self.close()
        self._dir = Path(tempfile.mkdtemp(prefix="callbench-piper-"))
        cmd = [self.python, "-m", "piper", "-m", str(self.model), "--output-dir", str(self._dir)]
        cmd += ["--noise-scale", repr(self.noise_scale), "--noise-w-scale", repr(self.noise_w_scale)]
        if self.length_scale is not None:
            cmd += ["--length-scale", str(self.length_scale)]
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self._written, self._tail = queue.Queue(), collections.deque(maxlen=20)
        assert self._proc.stderr is not None
        threading.Thread(
            target=_read_log, args=(self._proc.stderr, self._written, self._tail), daemon=True
        ).start()
        atexit.register(self.close)
        return self._proc

    def _stderr_tail(self) -> str:
        lines = [line for line in self._tail if line.strip() and WROTE not in line]
        return lines[-1] if lines else "no message"

    def synthesize(self, text: str, language: str) -> Audio:
        line = " ".join(text.split())
        if not line:
            raise VoiceEngineError("piper: nothing to say (empty text)")
        with self._lock:
            proc = self._start()
            assert proc.stdin is not None
            try:
                proc.stdin.write(f"{line}\n".encode())
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                raise VoiceEngineError(f"piper exited: {self._stderr_tail()}") from None
            deadline = time.monotonic() + SUBPROCESS_TIMEOUT_S
            while True:
                try:
                    path = self._written.get(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
                    break
                except queue.Empty:
                    if time.monotonic() > deadline:
                        self.close()
                        raise VoiceEngineError(
                            f"piper: no audio within {SUBPROCESS_TIMEOUT_S:.0f} s"
                        ) from None
            if path is None:  # the log ended: piper exited
                try:
                    code: int | str = proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    code = "(its log closed)"
                raise VoiceEngineError(f"piper exited {code}: {self._stderr_tail()}")
            try:
                audio = read_wav(path.read_bytes(), where="piper output")
            finally:
                path.unlink(missing_ok=True)
            return audio

    def close(self) -> None:
        """Stop the piper process and remove its folder (also run at interpreter exit)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):  # a broken pipe: it had already exited
                    proc.stdin.close()  # end of input: piper finishes and exits
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
