"""Each app's settings edit, decided alone: Stoker's keys written, the user's others kept."""

from __future__ import annotations

import json
import tomllib

import pytest

from stoker.integration.app_configs import (
    Api,
    App,
    ConfigProblem,
    Format,
    ModelFacts,
    Target,
    answer_text,
    app_named,
    config_files,
    edit_claude_code,
    edit_codex_toml,
    edit_continue,
    edit_llm_keys,
    edit_llm_models,
    edit_opencode,
    edit_zed,
    env_lines,
    mask,
    parse_json_text,
    probe_request,
    strip_jsonc,
)

M = ModelFacts("qwen3-8b:q4_k_m", 8192)
OTHER = ModelFacts("gemma-3-270m:q4_k_m", None)
T = Target("http://127.0.0.1:7857", "sk-secret-key-123456", M, (M, OTHER))
NOKEY = Target("http://127.0.0.1:7857", None, M, (M,))


def test_names_and_paths():
    assert app_named("Claude Code") is App.CLAUDE_CODE and app_named("open_webui") is App.OPEN_WEBUI
    assert app_named("vim") is None
    env = {"CODEX_HOME": "/c"}
    assert config_files(App.CODEX, "/h", env, "linux")[0].path == "/c/config.toml"
    assert config_files(App.CODEX, "/h", {}, "linux")[0].path == "/h/.codex/config.toml"
    assert config_files(App.ZED, "/h", {}, "darwin")[0].path == "/h/.config/zed/settings.json"
    assert config_files(App.ZED, "/h", {"XDG_CONFIG_HOME": "/x"}, "linux")[0].path == "/x/zed/settings.json"
    llm = config_files(App.LLM, "/h", {}, "darwin")
    assert llm[0].path == "/h/Library/Application Support/io.datasette.llm/extra-openai-models.yaml"
    assert config_files(App.LLM, "/h", {"LLM_USER_PATH": "/l"}, "linux")[1].path == "/l/keys.json"
    assert config_files(App.OPEN_WEBUI, "/h", {}, "linux") == ()  # environment only
    assert config_files(App.OPENCODE, "/h", {}, "linux")[0].format is Format.JSONC


def test_claude_code_keeps_the_users_settings_and_sets_the_window():
    current = {"theme": "dark", "env": {"MY_VAR": "1", "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "99"}}
    out = edit_claude_code(current, T)
    assert out["theme"] == "dark" and out["env"]["MY_VAR"] == "1"
    assert out["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:7857"  # no /v1: Claude Code adds it
    assert out["env"]["ANTHROPIC_AUTH_TOKEN"] == T.key and out["env"]["ANTHROPIC_MODEL"] == M.id
    assert out["env"]["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == "8192"
    assert out["env"]["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "2048"
    unknown = edit_claude_code(current, Target(T.base_url, None, OTHER, (OTHER,)))
    assert "CLAUDE_CODE_AUTO_COMPACT_WINDOW" not in unknown["env"]  # unknown is left out, never guessed
    assert unknown["env"]["ANTHROPIC_AUTH_TOKEN"] == "stoker"
    with pytest.raises(ConfigProblem):
        edit_claude_code({"env": ["x"]}, T)


def test_codex_root_keys_go_before_tables_and_other_lines_stay():
    current = ('# my settings\nmodel = "gpt-5"\napproval_policy = "never"\n\n[mcp_servers.docs]\ncommand = "x"\n\n'
               '[model_providers.stoker]\nbase_url = "http://old/v1"\n\n[profiles_note]\nkeep = true\n')
    text = edit_codex_toml(current, T)
    cfg = tomllib.loads(text)
    assert cfg["model"] == M.id and cfg["model_provider"] == "stoker" and cfg["approval_policy"] == "never"
    assert cfg["model_context_window"] == 8192 and cfg["model_auto_compact_token_limit"] == 6553
    assert cfg["model_providers"]["stoker"] == {"name": "Stoker", "base_url": "http://127.0.0.1:7857/v1",
                                                "wire_api": "responses",
                                                "experimental_bearer_token": T.key}
    assert cfg["mcp_servers"]["docs"]["command"] == "x" and cfg["profiles_note"]["keep"] is True
    assert text.startswith("# my settings") and text.count("[model_providers.stoker]") == 1
    assert edit_codex_toml(text, T) == text  # connecting twice changes nothing more
    assert "experimental_bearer_token" not in edit_codex_toml("", NOKEY)
    with pytest.raises(ConfigProblem) as bad:
        edit_codex_toml("model = = 3", T)
    assert "not valid TOML" in str(bad.value)


def test_opencode_provider_models_and_limits():
    out = edit_opencode({"theme": "x", "provider": {"other": {"npm": "y"}}}, T)
    assert out["provider"]["other"] == {"npm": "y"} and out["theme"] == "x"
    ours = out["provider"]["stoker"]
    assert ours["npm"] == "@ai-sdk/openai-compatible" and ours["options"]["baseURL"] == "http://127.0.0.1:7857/v1"
    assert ours["options"]["apiKey"] == T.key
    assert ours["models"][M.id]["limit"] == {"context": 8192, "output": 2048}
    assert "limit" not in ours["models"][OTHER.id] and out["model"] == f"stoker/{M.id}"


def test_continue_models_carry_context_length_and_replace_only_stokers():
    current = {"name": "Mine", "models": [{"name": "Stoker: old", "model": "old"}, {"name": "GPT", "model": "g"}]}
    out = edit_continue(current, T)
    assert out["name"] == "Mine" and out["schema"] == "v1" and out["version"] == "1.0.0"
    names = [m["name"] for m in out["models"]]
    assert names == [f"Stoker: {M.id}", f"Stoker: {OTHER.id}", "GPT"]
    first = out["models"][0]
    assert first["provider"] == "openai" and first["apiBase"] == T.openai_base and first["apiKey"] == T.key
    assert first["defaultCompletionOptions"] == {"contextLength": 8192, "maxTokens": 2048}


def test_zed_max_tokens_is_the_window_and_the_key_stays_out_of_the_file():
    out = edit_zed({"theme": "One", "language_models": {"ollama": {"x": 1}}}, T)
    assert out["language_models"]["ollama"] == {"x": 1}
    provider = out["language_models"]["openai_compatible"]["Stoker"]
    assert provider["api_url"] == T.openai_base
    assert provider["available_models"][0]["max_tokens"] == 8192
    assert T.key not in json.dumps(out)
    assert env_lines(App.ZED, T) == ("STOKER_API_KEY=sk-…3456",)
    assert env_lines(App.ZED, T, show_key=True) == (f"STOKER_API_KEY={T.key}",)


def test_llm_models_and_key():
    current = [{"model_id": "other", "api_base": "https://x/v1"},
               {"model_id": "old", "api_base": "http://127.0.0.1:7857/v1"}]
    out = edit_llm_models(current, T)
    assert [m["model_id"] for m in out] == [M.id, OTHER.id, "other"]
    assert out[0]["api_key_name"] == "stoker" and out[0]["api_base"] == T.openai_base
    assert edit_llm_keys({"openai": "k"}, T) == {"openai": "k", "stoker": T.key}
    assert edit_llm_keys({"stoker": "old"}, NOKEY) == {}
    with pytest.raises(ConfigProblem):
        edit_llm_models({"not": "a list"}, T)


def test_open_webui_is_environment_lines_with_the_key_masked():
    assert env_lines(App.OPEN_WEBUI, T) == ("OPENAI_API_BASE_URL=http://127.0.0.1:7857/v1",
                                            "OPENAI_API_KEY=sk-…3456")
    assert mask(None).startswith("(none") and T.key not in mask(T.key)


def test_jsonc_comments_and_trailing_commas():
    text = '{\n  // a comment\n  "url": "http://x//y", /* block */ "list": [1, 2,],\n}\n'
    assert json.loads(strip_jsonc(text)) == {"url": "http://x//y", "list": [1, 2]}
    assert parse_json_text(text, Format.JSONC)["url"] == "http://x//y"
    assert parse_json_text("", Format.JSON) == {}
    with pytest.raises(ConfigProblem):
        parse_json_text("[1]", Format.JSON)
    with pytest.raises(ConfigProblem):
        parse_json_text("{oops", Format.JSON)


def test_each_app_tests_with_its_own_api():
    assert probe_request(App.CLAUDE_CODE, T).api is Api.ANTHROPIC
    assert probe_request(App.CODEX, T).path == "/v1/responses"
    assert probe_request(App.ZED, T).path == "/v1/chat/completions"
    assert answer_text(Api.ANTHROPIC, {"content": [{"type": "text", "text": "hi"}]}) == "hi"
    assert answer_text(Api.RESPONSES, {"output": [{"type": "message", "content": [
        {"type": "output_text", "text": "yo"}]}]}) == "yo"
    assert answer_text(Api.CHAT, {"choices": [{"message": {"content": "hey"}}]}) == "hey"
    assert answer_text(Api.CHAT, {"choices": []}) is None
