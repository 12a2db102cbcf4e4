"""`stoker connect` with the real apps: the Codex CLI and Claude Code, installed from npm, run
non-interactively against the gateway (real engine, demo model) with only the settings that
`stoker connect` wrote, and answer. They skip only when npm cannot install them, and say so.

npm installs into one prefix cached across runs (STOKER_NPM_CACHE, else
~/.cache/stoker-ci/npm), so CI installs each package once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import keyring
import pytest

from stoker.base import secrets
from stoker.base.overrides import ModelOverrides
from stoker.cli import main as stoker_main
from stoker.fleet.commands import Shutdown
from stoker.fleet.launcher import RealPreparer
from stoker.fleet.supervisor import SupervisorOptions
from stoker.instance.control import ControlServer
from stoker.instance.instance import Instance
from tests.shell.engine_helpers import engines_running
from tests.shell.test_secrets import MemoryKeyring

APP_TIMEOUT_S = 480  # an agent's first prompt is thousands of tokens: minutes on a busy 2-core CPU
# The app's own bound comes first, so a slow answer fails with the app's output, not pytest's.
pytestmark = [pytest.mark.engine, pytest.mark.timeout(APP_TIMEOUT_S + 120)]
DEMO_ID = "smollm2-135m-instruct:q4_1"
CTX = 8192  # the demo model's whole training window, one slot: room for an agent's system prompt
KEY = "sk-stoker-connect-test-key"
# Read before any test moves HOME into its own folder.
NPM_PREFIX = Path(os.environ.get("STOKER_NPM_CACHE") or Path.home() / ".cache" / "stoker-ci" / "npm") / "tools"


def npm_tool(package: str, binary: str) -> Path:
    """The installed binary, installing `package` into the cached prefix the first time."""
    prefix = NPM_PREFIX
    exe = prefix / "node_modules" / ".bin" / binary
    if exe.exists():
        return exe
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"npm is not installed, so {package} cannot be installed for this test")
    prefix.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), package],
                              capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm could not install {package} within 15 minutes")
    if done.returncode != 0 or not exe.exists():
        pytest.skip(f"npm could not install {package}: {(done.stderr or done.stdout).strip()[-300:]}")
    return exe


@pytest.fixture
def running(engine_binary, demo_model, stoker_home, tmp_path, monkeypatch):
    """A running Stoker with an API key (in a memory keyring), its control channel, and a
    user home of its own for the apps' settings."""
    before = keyring.get_keyring()
    keyring.set_keyring(MemoryKeyring())
    secrets.set_api_key(KEY)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    # Greedy sampling as the engine's default (the apps send no temperature), so the demo model
    # answers the same way every run: at llama-server's 0.8 it sometimes rambled past any output
    # cap, which Claude Code reports as a failed answer (CI: "exceeded the 512 output token maximum").
    # 128 tokens at most where the app sets no cap (Codex sends no max_output_tokens): under Codex's
    # long prompt the demo model never stopped by itself, and at the 3 tokens/s of a loaded 2-core
    # run it was still writing when the test's 600 s ran out (700 tokens in 4 minutes).
    preparer = RealPreparer(engine=str(engine_binary), remember_last_model=False,
                            cli_overrides=ModelOverrides(ctx=CTX, slots=1,
                                                         extra_args=("--temp", "0", "--n-predict", "128")))
    inst = Instance(preparer, port=0, extra_models=(str(demo_model),),
                    options=SupervisorOptions(stop_grace_s=5)).start()
    control = ControlServer(inst.answer).serve()
    try:
        yield inst, home
    finally:
        control.close()
        inst.supervisor.submit(Shutdown())
        assert inst.supervisor.join(30)
        inst.close()
        keyring.set_keyring(before)
        assert engines_running(engine_binary) == []


def app_env(home: Path) -> dict:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TERM", "TMPDIR", "SSL_CERT_FILE")}
    return {**keep, "HOME": str(home), "NO_COLOR": "1"}


def test_codex_exec_answers_through_the_config_connect_wrote(running, capsys):
    codex = npm_tool("@openai/codex", "codex")
    inst, home = running
    assert stoker_main(["connect", "codex"]) == 0
    out = capsys.readouterr().out
    assert "answered" in out and KEY not in out  # the key went to the file, not to the terminal
    config = tomllib.loads((home / ".codex" / "config.toml").read_text())
    assert config["model"] == DEMO_ID and config["model_provider"] == "stoker"
    assert config["model_context_window"] == CTX  # the plan's window per slot, read from the engine
    provider = config["model_providers"]["stoker"]
    assert provider["base_url"] == inst.url + "/v1" and provider["wire_api"] == "responses"
    assert (home / ".codex" / "config.toml").stat().st_mode & 0o077 == 0  # it holds the key
    work = home / "work"
    work.mkdir()
    # Codex's own instructions are replaced by one line (its tools stay) so that the prompt is
    # small for the demo model; the endpoint, key, model and window come only from config.toml.
    brief = home / "brief.md"
    brief.write_text("You are brief.\n")
    done = subprocess.run([str(codex), "exec", "--skip-git-repo-check", "--sandbox", "read-only",
                           "-c", f"model_instructions_file={json.dumps(str(brief))}",
                           "Reply with one short greeting."], cwd=work, env=app_env(home),
                          capture_output=True, text=True, timeout=APP_TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip(), done.stderr[-2000:]
    assert stoker_main(["connect", "codex", "--undo"]) == 0
    assert not (home / ".codex" / "config.toml").exists()  # there was none before


def test_claude_code_print_mode_answers_through_the_settings_connect_wrote(running, capsys):
    claude = npm_tool("@anthropic-ai/claude-code", "claude")
    inst, home = running
    assert stoker_main(["connect", "claude-code"]) == 0
    assert "answered" in capsys.readouterr().out
    settings = home / ".claude" / "settings.json"
    written = json.loads(settings.read_text())["env"]
    assert written["ANTHROPIC_BASE_URL"] == inst.url and written["ANTHROPIC_AUTH_TOKEN"] == KEY
    assert written["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == str(CTX)
    # Claude Code fails a print-mode answer that reaches its output cap; greedy, the demo model's
    # greeting is short, and 512 is still a fraction of the quarter connect allows.
    settings.write_text(json.dumps({"env": {**written, "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "512"}}))
    env = {**app_env(home), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    # The demo model's 8,192 tokens cannot hold Claude Code's own system prompt and tool list,
    # so they are replaced; the endpoint, key and model come only from the settings file.
    done = subprocess.run([str(claude), "-p", "Say hello.", "--system-prompt", "Answer in one short sentence.",
                           "--tools", ""], cwd=home, env=env,
                          capture_output=True, text=True, timeout=APP_TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    assert done.stdout.strip()
    assert stoker_main(["connect", "claude-code", "--undo"]) == 0
    assert not (home / ".claude" / "settings.json").exists()
