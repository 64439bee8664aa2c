"""CPU safeguards for llama.cpp and what to tell the user when its native code crashes anyway.

llama.cpp built from source (``pip install llama-cpp-python``) targets the build machine's CPU
(``GGML_NATIVE=ON``). On Intel CPUs with AMX, its "extra buffer types" put matrix weights in an AMX
buffer whose kernel crashes in ``decode`` (``ggml_backend_amx_mul_mat``; measured: ``callbench
demo`` died with SIGSEGV 4 s in). Turning the extra buffer types off
(``llama_model_params.use_extra_bufts = False``) made it finish. The same switch also turns off the
CPU "repack" buffer type (interleaved Q4_0/Q4_K blocks on AVX2/AVX-512), which costs speed on the
CPUs where nothing crashes (docs/decisions.md, "Extra buffer types"), so the default is:

- off when the CPU reports AMX (``amx_tile``/``amx_int8``/``amx_bf16`` in ``/proc/cpuinfo``) or the
  llama.cpp build reports AMX support (``AMX_INT8 = 1`` in ``llama_print_system_info``);
- on otherwise;
- ``CALLBENCH_LOCAL_EXTRA_BUFTS=0`` or ``=1`` forces it either way (:data:`EXTRA_BUFTS_ENV`).

llama-cpp-python 0.3.36's ``Llama(...)`` has no argument for the switch: it fills its model
parameters from ``llama_cpp.llama_cpp.llama_model_default_params()`` inside ``__init__``.
:func:`extra_bufts_guard` therefore swaps that function for one that clears the flag while a model
is being constructed (callers hold their construction lock); :func:`install_server_safeguard` does
the same for good in a ``callbench serve-local`` server process.

A native crash cannot be caught in the process it kills, so the CLI runs such commands in a child
process (:mod:`callbench.runs.supervisor`); the local provider leaves a note of what llama.cpp was
doing (:func:`note_native`) for the supervisor's one-line message (:func:`crash_message`).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

EXTRA_BUFTS_ENV = "CALLBENCH_LOCAL_EXTRA_BUFTS"
NOTE_ENV = "CALLBENCH_NATIVE_NOTE"
"""Path of the file where the local provider notes what llama.cpp is doing (set by the supervisor)."""
TESTED_LLAMA_CPP_PYTHON = "0.3.36"
"""The llama-cpp-python version the ``[local]`` extra pins and CI tests."""
REBUILD_HINT = (
    'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install --force-reinstall --no-cache-dir '
    f"llama-cpp-python=={TESTED_LLAMA_CPP_PYTHON}"
)
"""A build of llama.cpp for a generic x86-64 CPU (no code specific to the build machine's CPU)."""
AMX_FLAGS = frozenset({"amx_tile", "amx_int8", "amx_bf16"})


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU feature flags the Linux kernel reports (the ``flags`` line of ``/proc/cpuinfo``);
    empty when the file is missing (other systems) or unreadable."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def build_features(llama_cpp: Any) -> str:
    """llama.cpp's own report of its compiled CPU features (``llama_print_system_info``), e.g.
    ``"CPU : SSE3 = 1 | AVX2 = 1 | ... | AMX_INT8 = 1 | REPACK = 1 |"``; empty if it fails."""
    try:
        return bytes(llama_cpp.llama_print_system_info()).decode("utf-8", "replace")
    except Exception:  # a broken or foreign build: the decision then rests on the CPU flags
        return ""


def extra_bufts_enabled(
    *, flags: frozenset[str] | None = None, features: str | None = None, env: Mapping[str, str] | None = None
) -> bool:
    """Whether llama.cpp may use its extra CPU buffer types (see the module docstring).

    ``CALLBENCH_LOCAL_EXTRA_BUFTS`` = ``0``/``false``/``no``/``off`` or ``1``/``true``/``yes``/``on``
    decides; unset or empty means automatic: False when ``flags`` (default :func:`cpu_flags`) hold
    an AMX flag or ``features`` (default :func:`build_features` of the installed llama_cpp) report
    ``AMX_INT8 = 1``/``AMX_BF16 = 1``, else True. Raises ValueError for any other value."""
    values: Mapping[str, str] = os.environ if env is None else env
    raw = values.get(EXTRA_BUFTS_ENV, "").strip().lower()
    if raw in ("0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw:
        raise ValueError(f"{EXTRA_BUFTS_ENV}={raw!r}: use 0 (off), 1 (on) or leave it unset (automatic)")
    flags = cpu_flags() if flags is None else flags
    if flags & AMX_FLAGS:
        return False
    if features is None:
        from callbench.models.local.openmp import import_llama_cpp

        try:
            llama_cpp = import_llama_cpp()
        except ImportError:
            return True
        features = build_features(llama_cpp)
    return not any(f"{name} = 1" in features for name in ("AMX_INT8", "AMX_BF16"))


def _without_extra_bufts(original: Any) -> Any:
    def without_extra_bufts() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    return without_extra_bufts


@contextlib.contextmanager
def extra_bufts_guard(enabled: bool) -> Iterator[None]:
    """While active, models constructed by llama-cpp-python get ``use_extra_bufts = enabled``.

    Swaps ``llama_cpp.llama_cpp.llama_model_default_params`` (which ``Llama.__init__`` calls) and
    restores it on exit; not thread-safe by itself: hold the lock that serialises constructions.
    Nothing is swapped when ``enabled`` is True (llama.cpp's default)."""
    if enabled:
        yield
        return
    import llama_cpp.llama_cpp as lib

    original = lib.llama_model_default_params
    lib.llama_model_default_params = _without_extra_bufts(original)
    try:
        yield
    finally:
        lib.llama_model_default_params = original


def install_server_safeguard(enabled: bool) -> None:
    """For a process that only serves a model (``callbench serve-local``): every model this process
    constructs gets ``use_extra_bufts = enabled`` (no restore)."""
    if enabled:
        return
    import llama_cpp.llama_cpp as lib

    lib.llama_model_default_params = _without_extra_bufts(lib.llama_model_default_params)


def note_native(text: str) -> None:
    """Record what native code is about to do in the supervisor's note file (``$CALLBENCH_NATIVE_NOTE``),
    so a crash can be explained; a no-op without a supervisor. Never raises."""
    path = os.environ.get(NOTE_ENV)
    if not path:
        return
    with contextlib.suppress(OSError):
        Path(path).write_text(text, encoding="utf-8")


def crash_message(signum: int, note: str = "") -> str:
    """One line for a process killed by ``signum``: what failed (``note``, when the local provider
    left one) and what to try. SIGKILL is usually the kernel's out-of-memory killer; SIGILL an
    instruction the CPU lacks; anything else a crash inside native code."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    where = f" while {note.strip()}" if note.strip() else ""
    if signum == getattr(signal, "SIGKILL", 9):
        return (
            f"error: callbench was killed ({name}){where}; this is usually the out-of-memory killer: "
            "free memory, or use a smaller model or context (settings n_ctx), then rerun the same "
            "command to resume (finished episodes are saved)"
        )
    if signum == getattr(signal, "SIGILL", 4):
        cause = "llama.cpp was built for a CPU with instructions this one lacks"
    elif "llama.cpp" in note:
        cause = "llama.cpp crashed in native code"
    else:
        cause = "native code crashed"
    return (
        f"error: callbench stopped: {cause} ({name}){where}. Try {EXTRA_BUFTS_ENV}=0 with the same "
        f"command, or rebuild llama.cpp for a generic CPU: {REBUILD_HINT}; finished episodes are "
        "saved and the same command resumes"
    )
