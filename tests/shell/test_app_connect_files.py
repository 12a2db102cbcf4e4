"""`stoker connect` on real files: each app's file written atomically after a backup, `--undo`
giving back exactly what was there (or removing what was not), a second connect keeping the
first backup, and a file that does not parse moved aside and reported, never overwritten blind."""

from __future__ import annotations

import json
import tomllib

import pytest
import yaml

from stoker.integration.app_configs import App, ModelFacts, Target
from stoker.integration.app_connect import (
    ABSENT_SUFFIX,
    BACKUP_SUFFIX,
    ConnectError,
    connect,
    gather_target,
    undo,
)

M = ModelFacts("smollm2-135m-instruct:q4_1", 2048)
T = Target("http://127.0.0.1:7857", "sk-test-key-abcdef", M, (M,))


def run(app, home, target=T):
    return connect(app, target, home=str(home), env={}, platform="linux")


def back(app, home):
    return undo(app, home=str(home), env={}, platform="linux")


@pytest.mark.parametrize("app, rel, read", [
    (App.CLAUDE_CODE, ".claude/settings.json", lambda t: json.loads(t)["env"]["CLAUDE_CODE_AUTO_COMPACT_WINDOW"]),
    (App.CODEX, ".codex/config.toml", lambda t: str(tomllib.loads(t)["model_context_window"])),
    (App.OPENCODE, ".config/opencode/opencode.json",
     lambda t: str(json.loads(t)["provider"]["stoker"]["models"][M.id]["limit"]["context"])),
    (App.CONTINUE, ".continue/config.yaml",
     lambda t: str(yaml.safe_load(t)["models"][0]["defaultCompletionOptions"]["contextLength"])),
    (App.ZED, ".config/zed/settings.json",
     lambda t: str(json.loads(t)["language_models"]["openai_compatible"]["Stoker"]["available_models"][0]
                   ["max_tokens"])),
    (App.LLM, ".config/io.datasette.llm/extra-openai-models.yaml",
     lambda t: yaml.safe_load(t)[0]["model_id"]),
])
def test_a_new_file_is_written_and_undo_removes_it(tmp_path, app, rel, read):
    report = run(app, tmp_path)
    path = tmp_path / rel
    assert str(path) in report.written and report.set_aside == ()
    assert read(path.read_text()) in ("2048", M.id)
    assert (tmp_path / (rel + ABSENT_SUFFIX)).exists()
    back(app, tmp_path)
    assert not path.exists() and not (tmp_path / (rel + ABSENT_SUFFIX)).exists()


def test_an_existing_file_is_backed_up_once_and_restored_exactly(tmp_path):
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    original = '{\n  "theme": "dark",\n  "env": {"MINE": "1"}\n}\n'
    path.write_text(original)
    path.chmod(0o640)
    first = run(App.CLAUDE_CODE, tmp_path)
    assert first.backups == (str(path) + BACKUP_SUFFIX,)
    edited = json.loads(path.read_text())
    assert edited["theme"] == "dark" and edited["env"]["MINE"] == "1" and edited["env"]["ANTHROPIC_AUTH_TOKEN"]
    assert path.stat().st_mode & 0o077 == 0  # it now holds the key: owner only
    second = run(App.CLAUDE_CODE, tmp_path, Target(T.base_url, T.key, ModelFacts("other", 4096), (M,)))
    assert second.backups == ()  # the backup is of the user's file, not of Stoker's first edit
    assert back(App.CLAUDE_CODE, tmp_path) == (f"restored {path} from its backup",)
    assert path.read_text() == original and not (tmp_path / (".claude/settings.json" + BACKUP_SUFFIX)).exists()
    with pytest.raises(ConnectError) as nothing:
        back(App.CLAUDE_CODE, tmp_path)
    assert "nothing to undo" in str(nothing.value)


@pytest.mark.parametrize("app, rel, junk", [
    (App.CLAUDE_CODE, ".claude/settings.json", "{not json"),
    (App.CODEX, ".codex/config.toml", "model = = broken"),
    (App.CONTINUE, ".continue/config.yaml", "models: [unclosed"),
    (App.ZED, ".config/zed/settings.json", "[1, 2]"),
])
def test_a_corrupt_file_is_kept_aside_reported_and_undo_gives_it_back(tmp_path, app, rel, junk):
    path = tmp_path / rel
    path.parent.mkdir(parents=True)
    path.write_text(junk)
    report = run(app, tmp_path)
    (sentence,) = report.set_aside
    aside = [p for p in path.parent.iterdir() if ".corrupt-" in p.name]
    assert len(aside) == 1 and aside[0].read_text() == junk and str(aside[0]) in sentence
    assert "could not be read" in sentence
    assert path.read_text() != junk and str(path) in report.written  # a fresh, valid file
    back(app, tmp_path)
    assert path.read_text() == junk  # undo gives back what was there, even broken


def test_zed_keeps_the_users_comments_file_readable_and_no_key_in_it(tmp_path):
    path = tmp_path / ".config" / "zed" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text('// Zed settings\n{\n  "theme": "One Dark", // mine\n  "vim_mode": true,\n}\n')
    report = run(App.ZED, tmp_path)
    value = json.loads(path.read_text())
    assert value["theme"] == "One Dark" and value["vim_mode"] is True and T.key not in path.read_text()
    assert report.env == ("STOKER_API_KEY=sk-…cdef",)


def test_llm_keeps_the_key_in_its_own_keys_file(tmp_path):
    keys = tmp_path / ".config" / "io.datasette.llm" / "keys.json"
    keys.parent.mkdir(parents=True)
    keys.write_text('{"openai": "sk-theirs"}')
    run(App.LLM, tmp_path)
    assert json.loads(keys.read_text()) == {"openai": "sk-theirs", "stoker": T.key}
    back(App.LLM, tmp_path)
    assert json.loads(keys.read_text()) == {"openai": "sk-theirs"}
    assert not (keys.parent / "extra-openai-models.yaml").exists()


def test_open_webui_writes_nothing(tmp_path):
    report = run(App.OPEN_WEBUI, tmp_path)
    assert report.written == () and report.env[0] == "OPENAI_API_BASE_URL=http://127.0.0.1:7857/v1"
    assert list(tmp_path.iterdir()) == []


def test_no_running_stoker_is_one_sentence(stoker_home):
    with pytest.raises(ConnectError) as none:
        gather_target()
    assert str(none.value).startswith("no Stoker instance is running")
