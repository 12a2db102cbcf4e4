"""Other tools' stores, built in their real on-disk layout in a temp HOME around real models.

Ollama (manifest + sha256-named blob), the Hugging Face cache (snapshot symlinks to
blobs, a split set, an mmproj) and LM Studio's folder; `stoker models --json` lists each
model once with its origin and the store's own name, a hard link or a second store's
blob of the same sha256 is one model, a non-GGUF Ollama blob is skipped with its reason,
nothing in a store is written, and `stoker run <ollama name> --headless` serves a chat.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stoker.library import models as md
from stoker.library import stores as model_stores
from tests.helpers.fake_hub import sha256_of

REPO = Path(__file__).resolve().parents[2]


def link_or_copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
    return dst


def ollama_store(home: Path, model: Path, name=("library", "smollm2", "135m"), projector: Path | None = None,
                 copy: bool = False) -> Path:
    """~/.ollama/models as `ollama pull` leaves it: a manifest per tag, blobs by sha256."""
    root = home / ".ollama" / "models"
    sha = sha256_of(model)
    blob = root / "blobs" / f"sha256-{sha}"
    if not blob.exists():
        if copy:
            blob.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(model, blob)
        else:
            link_or_copy(model, blob)
    template = b'{{ .Prompt }}'
    (root / "blobs" / f"sha256-{'1' * 64}").write_bytes(template)
    layers = [{"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{sha}",
               "size": model.stat().st_size},
              {"mediaType": "application/vnd.ollama.image.template", "digest": f"sha256:{'1' * 64}",
               "size": len(template)}]
    if projector is not None:
        psha = sha256_of(projector)
        link_or_copy(projector, root / "blobs" / f"sha256-{psha}")
        layers.append({"mediaType": "application/vnd.ollama.image.projector", "digest": f"sha256:{psha}",
                       "size": projector.stat().st_size})
    manifest = root / "manifests" / "registry.ollama.ai" / name[0] / name[1] / name[2]
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"schemaVersion": 2, "mediaType":
                                    "application/vnd.docker.distribution.manifest.v2+json",
                                    "config": {"digest": f"sha256:{'2' * 64}"}, "layers": layers}))
    return blob


def hub_store(cache: Path, repo: str, files: dict[str, Path], commit: str = "c" * 40) -> Path:
    """A hub cache repo as huggingface_hub leaves it: blobs by sha256, relative snapshot links."""
    storage = cache / ("models--" + repo.replace("/", "--"))
    for rel, src in files.items():
        blob = storage / "blobs" / sha256_of(src)
        if not blob.exists():
            link_or_copy(src, blob)
        link = storage / "snapshots" / commit / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    (storage / "refs" / "main").write_text(commit)
    return storage / "snapshots" / commit


def stoker(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "stoker", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())


def models_json() -> dict:
    done = stoker("models", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def tree_state(root: Path) -> dict:
    return {str(p): (p.is_symlink(), p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*")}


@pytest.fixture
def user_home(stoker_home) -> Path:
    return Path(os.environ["HOME"])


def test_each_store_is_listed_once_with_its_origin_and_name(user_home, demo_model, gemma_model):
    ollama_store(user_home, demo_model, copy=True)
    # A Gemma repository in the hub cache with a projector beside the model.
    projector = user_home / "made" / "mmproj-gemma-3-270m-f16.gguf"
    link_or_copy(demo_model, projector)  # any GGUF: only its name and place make it the projector
    hub_store(user_home / ".cache" / "huggingface" / "hub", "unsloth/gemma-3-270m-it-GGUF",
              {"gemma-3-270m-it-Q4_K_M.gguf": gemma_model, "mmproj-F16.gguf": projector})
    lms = user_home / ".lmstudio" / "models" / "lmstudio-community" / "SmolLM2-135M-Instruct-GGUF"
    lms.mkdir(parents=True)
    shutil.copyfile(demo_model, lms / "SmolLM2-135M-Instruct-Q4_1.gguf")  # a copy: another file
    # An Ollama tag whose blob is not a GGUF (a newer format): skipped with its reason.
    odd = user_home / "made" / "not-gguf.bin"
    odd.write_bytes(b"\x00SAFETENSORS" + b"\x00" * 64)
    ollama_store(user_home, odd, name=("library", "newformat", "latest"))
    before = {root: tree_state(root) for root in (user_home / ".ollama", user_home / ".cache", user_home / ".lmstudio")}

    out = models_json()
    rows = {(m["origin"], m["origin_name"]): m for m in out["models"]}
    assert set(rows) == {("ollama", "smollm2:135m"), ("hf", "unsloth/gemma-3-270m-it-GGUF:Q4_K_M"),
                         ("lmstudio", "lmstudio-community/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct-Q4_1.gguf")}
    assert len(out["models"]) == 3
    gemma = rows[("hf", "unsloth/gemma-3-270m-it-GGUF:Q4_K_M")]
    assert gemma["architecture"] == "gemma3" and gemma["mmproj"].endswith("mmproj-F16.gguf")
    assert gemma["path"].endswith("snapshots/" + "c" * 40 + "/gemma-3-270m-it-Q4_K_M.gguf")
    assert rows[("ollama", "smollm2:135m")]["architecture"] == "llama"
    (skipped,) = [s for s in out["skipped"] if s["origin_name"] == "newformat:latest"]
    assert "not a GGUF" in skipped["reason"]
    assert {s["origin"] for s in out["stores"]} >= {"ollama", "hf", "lmstudio", "llama-cpp"}
    human = stoker("models")
    assert "smollm2:135m" in human.stdout and "skipped newformat:latest" in human.stdout
    # Read-only: nothing in any store was created, changed or removed.
    assert {root: tree_state(root) for root in before} == before
    # The store names resolve for `stoker run` / `stoker plan`.
    assert md.resolve_model("smollm2:135m").name == f"sha256-{sha256_of(demo_model)}"
    assert md.resolve_model("unsloth/gemma-3-270m-it-GGUF:Q4_K_M").name == "gemma-3-270m-it-Q4_K_M.gguf"
    assert md.resolve_model("lmstudio-community/SmolLM2-135M-Instruct-GGUF:Q4_1").parent == lms
    # `stoker plan` takes the store's name and plans the file it names.
    plan = stoker("plan", "unsloth/gemma-3-270m-it-GGUF:Q4_K_M", "--json")
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)
    assert planned["model"] == gemma["path"] and planned["argv"][planned["argv"].index("-m") + 1] == gemma["path"]


def test_the_same_file_in_two_stores_is_one_model(user_home, demo_model):
    blob = ollama_store(user_home, demo_model)  # a hard link of the demo model
    # The same bytes in the hub cache (its blob named by the same sha256) ...
    hub_store(user_home / ".cache" / "huggingface" / "hub", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF",
              {"smollm2-135m-instruct-q4_1.gguf": demo_model})
    # ... and a hard link in LM Studio's folder.
    link_or_copy(blob, user_home / ".lmstudio" / "models" / "pub" / "smol" / "smol-Q4_1.gguf")
    (m,) = md.list_models(folders=())
    assert (m.origin, m.origin_name) == ("ollama", "smollm2:135m")
    assert "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF:Q4_1" in m.aliases
    assert "pub/smol/smol-Q4_1.gguf" in m.aliases
    assert md.resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF:Q4_1") == blob
    assert md.resolve_model("smollm2:135m") == blob
    # A bare Ollama model name means its :latest, as in Ollama.
    ollama_store(user_home, demo_model, name=("library", "tiny", "latest"))
    assert md.find_model("tiny") is not None


def test_hub_split_sets_are_joined_and_incomplete_ones_skipped(user_home, tmp_path):
    parts = {}
    for i in (1, 2):
        p = tmp_path / f"part{i}"
        p.write_bytes(b"GGUF" + bytes([i]) * 1000)
        parts[f"Q8_0/Big-Q8_0-0000{i}-of-00002.gguf"] = p
    lone = tmp_path / "lone"
    lone.write_bytes(b"GGUF" + b"\x09" * 10)
    parts["Other-Q4_K_M-00001-of-00003.gguf"] = lone
    hub_store(user_home / ".cache" / "huggingface" / "hub", "org/Big-GGUF", parts)
    scan = model_stores.scan_stores()
    (m,) = scan.models
    assert (m.origin_name, m.split_parts, m.size_bytes) == ("org/Big-GGUF:Q8_0", 2, 2008)
    assert m.path.name == "Big-Q8_0-00001-of-00002.gguf"
    (skipped,) = scan.skipped
    assert skipped.origin_name == "org/Big-GGUF:Q4_K_M" and "3 parts" in skipped.reason


def test_llama_cpp_caches_flat_and_in_hub_layout(user_home, tmp_path, monkeypatch):
    flat = user_home / ".cache" / "llama.cpp"
    flat.mkdir(parents=True)
    (flat / "bartowski_Llama-3.2-1B-Instruct-GGUF_Llama-3.2-1B-Instruct-Q4_K_M.gguf").write_bytes(b"GGUF" + b"\0" * 64)
    (m,) = model_stores.scan_stores().models
    assert (m.origin, m.origin_name) == ("llama-cpp",
                                         "bartowski_Llama-3.2-1B-Instruct-GGUF_Llama-3.2-1B-Instruct-Q4_K_M")
    # With LLAMA_CACHE set, b11434 keeps its -hf downloads there in the hub's layout.
    cache = tmp_path / "llama-cache"
    part = tmp_path / "m.gguf"
    part.write_bytes(b"GGUF" + b"\1" * 64)
    hub_store(cache, "ggml-org/tiny-GGUF", {"tiny-Q8_0.gguf": part})
    monkeypatch.setenv("LLAMA_CACHE", str(cache))
    (m,) = model_stores.scan_stores().models
    assert (m.origin, m.origin_name) == ("llama-cpp", "ggml-org/tiny-GGUF:Q8_0")


def test_scanning_is_cached_by_size_and_mtime(user_home, demo_model):
    ollama_store(user_home, demo_model)
    model_stores.clear_cache()
    calls = []
    real = model_stores.parse_ollama_manifest
    model_stores.parse_ollama_manifest = lambda text: calls.append(1) or real(text)
    try:
        model_stores.scan_stores()
        model_stores.scan_stores()
        assert len(calls) == 1  # the second scan used what the first read
        manifest = next((user_home / ".ollama" / "models" / "manifests").rglob("135m"))
        manifest.write_text(manifest.read_text().replace('"schemaVersion": 2', '"schemaVersion":  2'))
        model_stores.scan_stores()
        assert len(calls) == 2  # a changed file is read again
    finally:
        model_stores.parse_ollama_manifest = real


def test_removing_another_tools_model_hides_it_and_deletes_nothing(user_home, demo_model):
    blob = ollama_store(user_home, demo_model)
    before = tree_state(user_home / ".ollama")
    done = stoker("remove", "smollm2:135m", "--yes")
    assert done.returncode == 0, done.stderr
    assert "hidden: smollm2:135m (ollama) stays where it is" in done.stdout
    assert tree_state(user_home / ".ollama") == before and blob.is_file()
    assert models_json()["models"] == []
    assert [m["origin_name"] for m in json.loads(stoker("models", "--json").stdout)["models"]] == []
    assert "smollm2:135m" in stoker("models", "--all").stdout
    assert stoker("remove", "smollm2:135m", "--unhide").returncode == 0
    assert [m["origin_name"] for m in models_json()["models"]] == ["smollm2:135m"]


@pytest.mark.engine
def test_run_an_ollama_model_by_its_ollama_name(user_home, demo_model, engine_binary, stoker_home):
    from tests.shell.engine_helpers import chat, engines_running
    from tests.shell.test_run_cli import Running

    ollama_store(user_home, demo_model, name=("library", "smollm2", "135m-instruct-q4_1"))
    run = Running("smollm2:135m-instruct-q4_1", "--headless", "--engine", str(engine_binary), "--ctx", "1024",
                  "--slots", "1", "--port", "0")
    try:
        endpoint = run.wait_line("endpoint:", timeout=120).split()[1].removesuffix("/v1")
        run.wait_line("ready: ", timeout=120)
        assert chat(endpoint)  # through the gateway; the model answers under its store name too
        import httpx

        names = {m["id"]: m["aliases"] for m in httpx.get(endpoint + "/v1/models").json()["data"]}
        assert "smollm2:135m-instruct-q4_1" in names
        (engine,) = engines_running(engine_binary)
        assert f"sha256-{sha256_of(demo_model)}" in " ".join(engine.cmdline())
        stopped = stoker("stop")
        assert stopped.returncode == 0, stopped.stderr
        assert run.proc.wait(30) == 0
        assert engines_running(engine_binary) == []
    finally:
        run.close()


def test_a_deep_and_a_huge_manifest_are_skipped_with_reasons_and_the_rest_listed(user_home, demo_model):
    """A manifest nested 5,000 deep (Ollama's own parser allows 10,000) raised RecursionError
    out of the catalog refresh, so Stoker did not start; one of 100 MB was read whole."""
    ollama_store(user_home, demo_model, copy=True)
    tags = user_home / ".ollama" / "models" / "manifests" / "registry.ollama.ai" / "library"
    deep = tags / "deep" / "latest"
    deep.parent.mkdir(parents=True)
    deep.write_text('{"layers": ' + "[" * 5000 + "]" * 5000 + "}")
    huge = tags / "huge" / "latest"
    huge.parent.mkdir(parents=True)
    with open(huge, "wb") as f:
        f.write(b'{"layers": [')
        f.truncate(100 * 1000 * 1000)  # sparse: 100 MB to read, none to write
    model_stores.clear_cache()
    scan = model_stores.scan_stores()  # what the catalog refresh does at start
    assert [m.origin_name for m in scan.models] == ["smollm2:135m"]
    reasons = {s.origin_name: s.reason for s in scan.skipped}
    assert "nested too deeply" in reasons["deep:latest"]
    assert "over 1 MiB" in reasons["huge:latest"]
    out = models_json()
    assert [m["origin_name"] for m in out["models"]] == ["smollm2:135m"]
    assert {s["origin_name"] for s in out["skipped"]} == {"deep:latest", "huge:latest"}
    human = stoker("models")
    assert human.returncode == 0 and "skipped deep:latest" in human.stdout and "skipped huge:latest" in human.stdout
    assert "Traceback" not in human.stderr


def test_the_linux_ollama_services_store_is_read_only_when_settings_say_so(user_home):
    from stoker.base.store import SettingsStore

    service = "/usr/share/ollama/.ollama/models"
    assert service not in {r.path for r in model_stores.roots_here()}
    SettingsStore().update(read_ollama_service_store=True)
    expected = sys.platform.startswith("linux")
    assert (service in {r.path for r in model_stores.roots_here()}) is expected
    stores = {s["path"] for s in models_json()["stores"]}
    assert (service in stores) is expected
    SettingsStore().update(read_ollama_service_store=False)
    assert service not in {s["path"] for s in models_json()["stores"]}
