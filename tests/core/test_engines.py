"""Pure engine decisions: version lines, build progress, build preference, toolkits, flags."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from stoker.engines.builds import (
    BACKEND_ORDER,
    EngineBuild,
    cmake_flags,
    detect_toolkits,
    flags_match_cache,
    order_builds,
    parse_build_progress,
    parse_cmake_cache,
    parse_version_output,
    progress_steps_to_report,
)

DATA = Path(__file__).parent / "data"


def test_version_line_of_the_real_build():
    text = "version: 0.6.0-dev (build 11434, commit unknown)\nbuilt with GNU 12.2.0 for Linux x86_64\n"
    v = parse_version_output(text)
    assert v == ("0.6.0-dev", 11434, None)


def test_version_line_with_a_commit_and_noise_around_it():
    text = "load_backend: loaded CPU backend\nversion: 6500 (build 6500, commit 1a2b3c4d)\n"
    v = parse_version_output(text)
    assert (v.version, v.build, v.commit) == ("6500", 6500, "1a2b3c4d")


def test_no_version_line_is_none():
    assert parse_version_output("error: invalid argument: --version") is None
    assert parse_version_output("") is None


def test_ninja_progress_on_the_real_llama_server_build_log():
    lines = (DATA / "ninja-llama-server-b11434.log").read_text().splitlines()
    fractions = [f for f in map(parse_build_progress, lines) if f is not None]
    assert len(fractions) == 214
    assert fractions == sorted(fractions)
    assert fractions[0] == 1 / 214 and fractions[-1] == 1.0
    # cmake chatter in the same stream is not progress
    assert parse_build_progress("-- UI: HF download failed") is None
    assert parse_build_progress("  UI: no assets available - building without an embedded UI.  In a") is None


def test_make_progress_on_real_make_output():
    lines = (DATA / "make-progress.log").read_text().splitlines()
    fractions = [parse_build_progress(ln) for ln in lines]
    assert None not in fractions
    assert fractions[0] == 0.12 and fractions[-1] == 1.0
    assert fractions == sorted(fractions)


def test_plain_progress_reports_every_five_percent_not_every_step():
    lines = (DATA / "ninja-llama-server-b11434.log").read_text().splitlines()
    last, reported = None, []
    for f in filter(None, map(parse_build_progress, lines)):
        if progress_steps_to_report(last, f):
            reported.append(f)
            last = f
    assert 15 <= len(reported) <= 21  # 214 steps collapse to about one line per 5 %
    assert reported[-1] == 1.0
    assert all(b - a >= 0.04 for a, b in pairwise(reported[1:]))


def b(id_, backend="cpu", source="own", status="ok", build=11434, binary=None):
    return EngineBuild(id=id_, binary=binary or f"/x/{id_}/llama-server", source=source, backend=backend,
                       build=build, status=status)


def test_configured_path_comes_first_then_gpu_line_then_source():
    builds = [
        b("pkg", "cuda", "package"),
        b("path-cpu", "cpu", "path"),
        b("own-cpu", "cpu", "own"),
        b("own-vulkan", "vulkan", "own"),
        b("own-rocm", "rocm", "own"),
        b("path-cuda", "cuda", "path"),
        b("own-cuda", "cuda", "own"),
        b("mine", "cpu", "configured"),
    ]
    ids = [x.id for x in order_builds(builds)]
    assert ids == ["mine", "own-cuda", "path-cuda", "pkg", "own-rocm", "own-vulkan", "own-cpu", "path-cpu"]


def test_unusable_and_quarantined_builds_go_last_but_a_pin_beats_quarantine():
    builds = [b("own-cuda", "cuda"), b("own-cpu", "cpu"), b("broken", "cuda", status="missing-library"),
              b("mine", "vulkan", "configured")]
    ids = [x.id for x in order_builds(builds, quarantined={"own-cuda", "mine"})]
    assert ids == ["mine", "own-cpu", "own-cuda", "broken"]
    by_path = order_builds(builds[:2], quarantined={"/x/own-cuda/llama-server"})
    assert [x.id for x in by_path] == ["own-cpu", "own-cuda"]


@given(st.lists(st.tuples(st.sampled_from(BACKEND_ORDER + ("sycl", None)),
                          st.sampled_from(("configured", "own", "path", "package")),
                          st.sampled_from(("ok", "broken", "missing-library")),
                          st.one_of(st.none(), st.integers(0, 20000))), max_size=12))
def test_order_is_a_permutation_with_usable_builds_first(specs):
    builds = [b(f"b{i}", be, src, stat, num) for i, (be, src, stat, num) in enumerate(specs)]
    ordered = order_builds(builds)
    assert sorted(x.id for x in ordered) == sorted(x.id for x in builds)
    usable = [x.usable for x in ordered]
    assert usable == sorted(usable, reverse=True)


def test_toolkit_without_its_gpu_is_skipped_with_a_reason():
    backends, skipped = detect_toolkits({"nvcc": "/usr/local/bin/nvcc"})
    assert backends == ("cpu",)
    assert len(skipped) == 1 and "--backend cuda" in skipped[0]


def test_each_toolkit_with_its_gpu_is_built_after_cpu():
    which = {"nvcc": "/n", "nvidia_gpu": "/dev/nvidia0", "hipcc": "/h", "amd_gpu": "/dev/kfd",
             "glslc": "/g", "vulkan_headers": "/usr/include/vulkan/vulkan.h", "vulkan_loader": "libvulkan.so.1"}
    assert detect_toolkits(which) == (("cpu", "cuda", "rocm", "vulkan"), ())


def test_half_a_vulkan_sdk_says_what_is_missing():
    backends, skipped = detect_toolkits({"glslc": "/usr/bin/glslc", "vulkan_loader": "x"})
    assert backends == ("cpu",) and "Vulkan headers" in skipped[0]


def test_macos_builds_metal():
    assert detect_toolkits({}, system="Darwin") == (("metal",), ())


def test_flags_carry_build_number_rpath_and_the_native_choice():
    portable = cmake_flags("cpu")
    assert "-DLLAMA_BUILD_NUMBER=11434" in portable and "-DGGML_NATIVE=OFF" in portable
    assert "-DCMAKE_INSTALL_RPATH=$ORIGIN" in portable
    assert "-DGGML_NATIVE=ON" in cmake_flags("cpu", native=True)
    assert "-DGGML_CUDA=ON" in cmake_flags("cuda")
    assert "-DCMAKE_INSTALL_RPATH=@loader_path" in cmake_flags("metal", system="Darwin")


# From the CMakeCache.txt of the lead's real b11434 CPU build (-DGGML_NATIVE=OFF).
REAL_CACHE = """# This is the CMakeCache file.
//Build type
CMAKE_BUILD_TYPE:STRING=Release
CMAKE_BUILD_WITH_INSTALL_RPATH:UNINITIALIZED=ON
CMAKE_INSTALL_RPATH:UNINITIALIZED=$ORIGIN
GGML_CUDA:BOOL=OFF
GGML_NATIVE:BOOL=OFF
LLAMA_BUILD_EXAMPLES:BOOL=OFF
LLAMA_BUILD_NUMBER:UNINITIALIZED=11434
LLAMA_BUILD_TESTS:BOOL=OFF
LLAMA_CURL:UNINITIALIZED=OFF
"""


def test_a_build_folder_matches_only_the_flags_it_was_configured_with():
    cache = parse_cmake_cache(REAL_CACHE)
    assert cache["CMAKE_INSTALL_RPATH"] == "$ORIGIN"
    assert flags_match_cache(cmake_flags("cpu", native=False), cache) == ()
    assert flags_match_cache(cmake_flags("cpu", native=True), cache) == ("-DGGML_NATIVE=ON",)
    assert flags_match_cache(cmake_flags("cuda", native=False), cache) == ("-DGGML_CUDA=ON",)
    assert flags_match_cache(("-DGGML_VULKAN=OFF",), cache) == ()  # never heard of = off


def test_gpu_facts_for_the_manifest():
    from stoker.engines.builds import gfx_targets_from_flags, parse_nvcc_release

    nvcc = ("nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
            "Build cuda_13.0.r13.0/compiler.36424714_0")
    assert parse_nvcc_release(nvcc) == "13.0" and parse_nvcc_release("") is None
    assert gfx_targets_from_flags(("-DGGML_HIP=ON", "-DAMDGPU_TARGETS=gfx1100;gfx1030")) == ("gfx1100", "gfx1030")
    assert gfx_targets_from_flags(("-DGGML_HIP=ON",)) is None
