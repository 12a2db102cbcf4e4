"""Engine discovery against the real b11434 build: version, libraries, checksum, sources."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest

from stoker.engines import find as eng
from stoker.engines.setup import install_build


def fake_engine(path: Path, version_line: str = "version: 9999 (build 9999, commit abc1234)") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{version_line}' >&2\necho 'built with test' >&2\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.engine
def test_real_build_reports_build_11434(engine_binary):
    v = eng.engine_version(engine_binary)
    assert v is not None and v.build == 11434 and v.version
    assert eng.check_libraries(engine_binary) == ()


@pytest.mark.engine
def test_binary_without_its_libraries_is_missing_library(engine_binary, tmp_path):
    lonely = tmp_path / "lonely" / "llama-server"
    lonely.parent.mkdir()
    shutil.copy2(engine_binary, lonely)
    missing = eng.check_libraries(lonely)
    assert missing == ("libllama-server-impl.so",)  # what ldd can see: the direct dependency
    build = eng.inspect_binary(lonely, "configured")
    assert build.status == "missing-library"
    assert set(build.missing_libraries) == set(missing)
    for name in missing:
        assert name in build.status_reason


@pytest.fixture
def installed_home(stoker_home, engine_dir):
    """A STOKER_HOME with the real CPU build installed by our own installer."""
    root = stoker_home / "data" / "engines" / "llama-server"
    flags = tuple(json.loads((engine_dir / "manifest.json").read_text())["cmake_flags"])
    install_build(engine_dir, "cpu", flags, root)
    return root


@pytest.mark.engine
def test_own_build_is_discovered_first_and_ok(installed_home, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    builds = eng.discover_engines()
    own = [b for b in builds if b.source == "own"]
    assert [b.id for b in own] == ["b11434-cpu"]
    assert own[0].status == "ok" and own[0].build == 11434 and own[0].backend == "cpu"
    assert builds[0] is own[0]


@pytest.mark.engine
def test_a_changed_binary_fails_its_checksum(installed_home):
    binary = installed_home / "b11434-cpu" / "llama-server"
    with open(binary, "ab") as f:
        f.write(b"\0")
    (b,) = eng.own_builds(installed_home)
    assert b.status == "checksum-mismatch" and "stoker setup --force" in b.status_reason


def test_partial_and_manifestless_folders_are_not_builds(stoker_home):
    root = stoker_home / "data" / "engines" / "llama-server"
    fake_engine(root / ".b11434-cpu.partial-123" / "llama-server")
    fake_engine(root / "b11434-cuda" / "llama-server")  # no manifest: an unfinished copy
    assert eng.own_builds(root) == ()


def test_configured_path_from_settings_and_path_lookup(stoker_home, tmp_path, monkeypatch):
    mine = fake_engine(tmp_path / "mine" / "llama-server", "version: 7000 (build 7000, commit deadbee)")
    (tmp_path / "mine" / "libggml-cuda.so").write_bytes(b"")
    on_path = fake_engine(tmp_path / "bin" / "llama-server")
    (stoker_home / "config").mkdir()
    (stoker_home / "config" / "settings.json").write_text(json.dumps({"schema": 1, "engine": str(mine.parent)}))
    monkeypatch.setenv("PATH", f"{on_path.parent}:/usr/bin:/bin")
    builds = eng.discover_engines()
    assert [(b.source, b.build, b.backend) for b in builds[:2]] == [("configured", 7000, "cuda"),
                                                                    ("path", 9999, None)]
    assert builds[0].commit == "deadbee" and builds[0].id == "configured-b7000-cuda"
    # the same binary configured and on PATH is listed once, as configured
    monkeypatch.setenv("PATH", f"{mine.parent}:/usr/bin:/bin")
    assert [b.source for b in eng.discover_engines()] == ["configured"]


def test_a_binary_that_prints_no_version_is_broken(tmp_path):
    silent = fake_engine(tmp_path / "llama-server", "hello")
    b = eng.inspect_binary(silent, "configured")
    assert b.status == "broken" and "--version" in b.status_reason


def test_missing_configured_binary(tmp_path):
    b = eng.inspect_binary(tmp_path / "nope" / "llama-server", "configured")
    assert b.status == "missing"


def test_version_is_cached_by_identity(tmp_path):
    f = fake_engine(tmp_path / "llama-server", "version: 1 (build 1, commit a)")
    assert eng.engine_version(f).build == 1
    fake_engine(f, "version: 22 (build 22, commit b)")  # rewritten: size and mtime change
    assert eng.engine_version(f).build == 22
