"""Log tail reads only the end of a big file; the autostart entry is created and removed."""

from __future__ import annotations

import os

from stoker.base.log_tail import newest_log, read_tail
from stoker.integration.autostart import autostart_file, set_autostart


def test_tail_of_a_large_log_is_the_last_whole_lines(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text("".join(f"line {i}\n" for i in range(100_000)))
    tail = read_tail(log, max_lines=3, max_bytes=4096)
    assert tail == ("line 99997", "line 99998", "line 99999")
    assert all(line.startswith("line ") for line in read_tail(log, max_lines=10_000,
                                                                 max_bytes=4096))
    assert read_tail(tmp_path / "missing.log") == ()


def test_newest_log_picks_the_latest_written(tmp_path):
    assert newest_log(tmp_path / "nope") is None
    (tmp_path / "a.log").write_text("a")
    (tmp_path / "sub").mkdir()
    b = tmp_path / "sub" / "b.log"
    b.write_text("b")
    os.utime(tmp_path / "a.log", (1, 1))
    assert newest_log(tmp_path) == b


def test_autostart_entry_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    said = set_autostart(True, ["/opt/stoker/bin/stoker", "tray"], system="linux")
    text = autostart_file().read_text()
    assert "Exec=/opt/stoker/bin/stoker tray" in text and str(autostart_file()) in said.sentence
    assert said.done and "X-GNOME-Autostart-enabled=true" in text
    assert set_autostart(False, system="linux").done
    assert not autostart_file().exists()
