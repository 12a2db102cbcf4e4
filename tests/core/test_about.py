"""`stoker --version` and the About box: what they say with and without an engine build."""

from __future__ import annotations

from stoker.engines.about import AboutInfo, InstalledEngine, about_lines, version_line

FOLDERS = (("config", "/h/.config/stoker"), ("data", "/h/.local/share/stoker"),
           ("cache", "/h/.cache/stoker"), ("logs", "/h/.local/state/stoker/log"))
ENGINE = InstalledEngine("b11434-cpu", "11434 (abc123)", "/h/.local/share/stoker/engines/llama-server/b11434-cpu")


def info(**kw):
    base = dict(version="0.1.0", frozen=False, python="3.11.7", qt=None, engines=(ENGINE,), folders=FOLDERS)
    return AboutInfo(**{**base, **kw})


def test_version_line_names_the_engine_build():
    assert version_line(info()) == "stoker 0.1.0 (Python 3.11.7); engine b11434-cpu (llama-server 11434 (abc123))"
    assert version_line(info(frozen=True, engines=())) == (
        "stoker 0.1.0 (bundle); no engine build installed (run `stoker setup`)")
    assert version_line(info(version=None)).startswith("stoker unknown (not installed)")


def test_about_lines_show_version_engine_and_every_folder():
    assert about_lines(info(qt="6.8.1")) == (
        "Stoker 0.1.0", "Python 3.11.7, Qt 6.8.1",
        f"Engine b11434-cpu (llama-server 11434 (abc123)): {ENGINE.folder}",
        "Config: /h/.config/stoker", "Data: /h/.local/share/stoker", "Cache: /h/.cache/stoker",
        "Logs: /h/.local/state/stoker/log")
    assert "Engine: none installed; run `stoker setup`" in about_lines(info(engines=()))
