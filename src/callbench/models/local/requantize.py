"""Requantised copies of the embedded weights (``local:0.5b-q4_0``), for speed on small CPUs.

llama.cpp's CPU backend repacks Q4_0 weights into interleaved blocks on x86 (AVX2) and ARM, which
its matrix kernels read faster than the K-quants of the shipped file. Measured on 2 cores (AVX2)
with the 0.5B model: prompt processing 81 -> 108 tokens a second at 1,000 tokens and 66 -> 84 at
4,000. The copy is made from the verified pinned file (:func:`~callbench.models.local.weights.
ensure_weights`) with llama.cpp's own quantizer (``llama_model_quantize``, requantising allowed),
written to ``<cache>/models/<source sha256>-<quant>.gguf`` through a temporary file and renamed into
place. A JSON marker beside it records the source hash, the llama-cpp-python version that made it,
and the copy's size, mtime and SHA-256; a copy whose marker does not match is made again.
Requantising loses some quality: the copy is a smoke-test model like its source.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from callbench.models.local.openmp import import_llama_cpp
from callbench.models.local.weights import VARIANTS, WeightsError, check_gguf, ensure_weights, file_sha256

QUANT_TYPES = {"q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0", "q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0"}
"""Supported target types: our name -> llama.cpp ``llama_ftype`` constant name."""

Quantizer = Callable[[Path, Path, str], None]
"""``(source, destination, quant)``: writes the requantised file or raises WeightsError."""


def llama_quantize(source: Path, destination: Path, quant: str) -> None:
    """Requantise ``source`` into ``destination`` with llama.cpp (all cores).

    Raises WeightsError when llama-cpp-python is missing or the quantizer returns non-zero."""
    try:
        llama_cpp = import_llama_cpp()
        from llama_cpp._utils import suppress_stdout_stderr
    except ImportError:
        from callbench.models.local.extra import install_hint

        raise WeightsError(f"requantising needs llama-cpp-python: {install_hint('local')}") from None
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, QUANT_TYPES[quant])
    params.allow_requantize = True
    params.nthread = max(1, os.cpu_count() or 1)
    with suppress_stdout_stderr(disable=False):
        rc = llama_cpp.llama_model_quantize(str(source).encode(), str(destination).encode(), params)
    if rc != 0:
        raise WeightsError(f"llama.cpp could not requantise {source.name} to {quant} (return code {rc})")


def _llama_version() -> str:
    try:
        llama_cpp = import_llama_cpp()
    except ImportError:
        return "unknown"
    return str(getattr(llama_cpp, "__version__", "unknown"))


def _marker_path(target: Path) -> Path:
    return target.with_name(target.name + ".json")


def _marker_matches(target: Path, expected: dict[str, str]) -> bool:
    try:
        data = json.loads(_marker_path(target).read_text(encoding="utf-8"))
        st = target.stat()
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data == {
        **expected, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": data.get("sha256")
    }


def ensure_requantized(
    name: str,
    quant: str = "q4_0",
    *,
    root: Path | None = None,
    quantize: Quantizer = llama_quantize,
) -> Path:
    """The path of variant ``name`` requantised to ``quant``, made on first use (seconds for 0.5B).

    Raises WeightsError for an unknown variant or type, a variant that is not installed (with the
    pip command), or a quantizer failure; a failed attempt leaves no file behind.
    """
    if quant not in QUANT_TYPES:
        raise WeightsError(f"unknown requantisation {quant!r}; expected one of {', '.join(QUANT_TYPES)}")
    if name not in VARIANTS:
        raise WeightsError(f"unknown embedded model {name!r}; expected one of {', '.join(VARIANTS)}")
    source = ensure_weights(name, root=root)
    target = source.with_name(f"{VARIANTS[name].sha256}-{quant}.gguf")
    expected = {"source_sha256": VARIANTS[name].sha256, "quant": quant, "llama_cpp": _llama_version()}
    if target.exists() and _marker_matches(target, expected):
        return target
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        quantize(source, tmp, quant)
        check_gguf(tmp)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    st = target.stat()
    marker = {**expected, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": file_sha256(target)}
    fd, tmp_marker = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps(marker))
    os.replace(tmp_marker, _marker_path(target))
    return target
