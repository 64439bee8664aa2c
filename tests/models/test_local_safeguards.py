"""llama.cpp's extra buffer types: off on AMX CPUs (their AMX kernel crashes), on elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from callbench.models.local.safeguards import (
    cpu_flags,
    extra_bufts_enabled,
    extra_bufts_guard,
    install_server_safeguard,
)

NO_AMX = "CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 1 | AVX512_VNNI = 1 | REPACK = 1 |"
AMX_BUILD = "CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 |"


def test_cpu_flags_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
        "flags\t\t: fpu sse2 avx2 avx512f amx_bf16 amx_tile amx_int8\n\nprocessor\t: 1\n"
    )
    assert {"avx2", "amx_tile", "amx_int8"} <= cpu_flags(info)
    assert cpu_flags(tmp_path / "missing") == frozenset()


@pytest.mark.parametrize(
    ("flags", "features", "env", "expected"),
    [
        ({"avx2", "avx512f"}, NO_AMX, {}, True),  # this machine kind (AMD EPYC, AVX-512, no AMX)
        ({"avx2"}, "CPU : AVX2 = 1 | REPACK = 1 |", {}, True),  # AVX2-only
        ({"avx512f", "amx_tile", "amx_int8"}, NO_AMX, {}, False),  # AMX CPU, whatever the build
        ({"avx2"}, AMX_BUILD, {}, False),  # a build with AMX kernels (no /proc/cpuinfo, e.g.)
        ({"amx_tile"}, AMX_BUILD, {"CALLBENCH_LOCAL_EXTRA_BUFTS": "1"}, True),
        ({"avx2"}, NO_AMX, {"CALLBENCH_LOCAL_EXTRA_BUFTS": "off"}, False),
        ({"avx2"}, NO_AMX, {"CALLBENCH_LOCAL_EXTRA_BUFTS": " "}, True),
    ],
)
def test_extra_bufts_decision(flags: set[str], features: str, env: dict[str, str], expected: bool) -> None:
    assert extra_bufts_enabled(flags=frozenset(flags), features=features, env=env) is expected


def test_bad_override_is_named() -> None:
    with pytest.raises(ValueError, match=r"CALLBENCH_LOCAL_EXTRA_BUFTS='maybe': use 0 \(off\), 1 \(on\)"):
        extra_bufts_enabled(flags=frozenset(), features=NO_AMX, env={"CALLBENCH_LOCAL_EXTRA_BUFTS": "maybe"})


def test_guard_clears_the_flag_in_llama_cpp_model_params(monkeypatch: pytest.MonkeyPatch) -> None:
    lib = pytest.importorskip("llama_cpp.llama_cpp")
    original = lib.llama_model_default_params
    assert original().use_extra_bufts is True  # llama.cpp's default
    with extra_bufts_guard(False):
        assert lib.llama_model_default_params().use_extra_bufts is False
    assert lib.llama_model_default_params is original
    with extra_bufts_guard(True):
        assert lib.llama_model_default_params is original
    monkeypatch.setattr(lib, "llama_model_default_params", original)  # restored after the test
    install_server_safeguard(False)
    assert lib.llama_model_default_params().use_extra_bufts is False
    # what Llama.__init__ reads: the attribute of the module it imported as ``llama_cpp``
    import llama_cpp.llama as llama_module

    assert llama_module.llama_cpp.llama_model_default_params().use_extra_bufts is False
