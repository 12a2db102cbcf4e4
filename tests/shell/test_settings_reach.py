"""Settings the dialogs save really change what Stoker does: the gateway listens on
Settings' gateway_port and lets in the web pages listed in cors_origins (both read when it
starts), and a model's aliases (saved per model) name it once the catalog rescans. The
memory budget and the idle timeouts are shown reaching the preparer in test_launcher.py.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths
from stoker.base.store import OverridesStore, SettingsStore
from stoker.engines.process import free_loopback_port
from stoker.fleet.commands import Shutdown
from stoker.fleet.supervisor import FunctionPreparer
from stoker.instance.instance import Instance, gateway_port
from stoker.library.catalog import ModelCatalog
from tests.shell.engine_helpers import wait_until


def _never(model_path, attempt):
    raise AssertionError("nothing is loaded in this test")


never_prepare = FunctionPreparer(_never)


def get(url, origin=None):
    req = urllib.request.Request(url, headers={"Origin": origin} if origin else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_gateway_listens_on_the_settings_port_and_allows_the_listed_origins(stoker_home):
    port = free_loopback_port()
    SettingsStore(stoker_paths().config).update(gateway_port=port,
                                               cors_origins=["https://chat.example"])
    assert gateway_port(None) == port and gateway_port(9) == 9  # --port beats Settings
    instance = Instance(never_prepare, port=gateway_port(None)).start()
    try:
        assert instance.url == f"http://127.0.0.1:{port}"
        base = f"http://127.0.0.1:{port}/v1"
        status, headers, _ = get(base + "/models", origin="https://chat.example")
        assert status == 200
        assert headers.get("Access-Control-Allow-Origin") == "https://chat.example"
        status, _headers, body = get(base + "/models", origin="https://other.example")
        assert status == 403 and b"add that origin in Stoker's Settings" in body
    finally:
        instance.supervisor.submit(Shutdown())
        instance.close()
        instance.supervisor.join(10)


def test_a_saved_alias_names_the_model_after_a_rescan(stoker_home, demo_model):
    models = stoker_home / "data" / "models"
    models.mkdir(parents=True)
    (models / demo_model.name).symlink_to(demo_model)
    catalog = ModelCatalog()
    assert catalog.refresh().resolve("my-chat") is None
    OverridesStore(stoker_paths().config).set(models / demo_model.name,
                                              ModelOverrides(aliases=("my-chat", "gpt-4o-mini")))
    entry = catalog.refresh().resolve("gpt-4o-mini")
    assert entry is not None and entry.path == os.path.realpath(demo_model)
    assert catalog.current.resolve("my-chat") == entry
    listed = json.dumps([e.aliases for e in catalog.current.entries])
    assert "my-chat" in listed


def test_an_alias_saved_or_removed_in_the_dialog_reaches_the_gateway_at_once(stoker_home, demo_model):
    """The dialog saves the overrides, then sends ApplyOverrides: the catalog is rescanned
    then, so a removed alias stops naming the model without waiting for a request to miss."""
    from stoker.fleet.commands import ApplyOverrides

    models = stoker_home / "data" / "models"
    models.mkdir(parents=True)
    (models / demo_model.name).symlink_to(demo_model)
    path = str(models / demo_model.name)
    store = OverridesStore(stoker_paths().config)
    instance = Instance(never_prepare, port=0).start()

    def aliases() -> list[str]:
        status, _headers, body = get(instance.url + "/v1/models")
        assert status == 200
        return [a for m in json.loads(body)["data"] for a in m["aliases"]]

    try:
        assert "my-chat" not in aliases()
        store.set(path, ModelOverrides(aliases=("my-chat",)))
        instance.supervisor.submit(ApplyOverrides(path, ModelOverrides(aliases=("my-chat",)), restart=False))
        assert wait_until(lambda: "my-chat" in aliases(), 5)
        store.set(path, ModelOverrides())
        instance.supervisor.submit(ApplyOverrides(path, ModelOverrides(), restart=False))
        assert wait_until(lambda: "my-chat" not in aliases(), 5), "a removed alias still named the model"
    finally:
        instance.supervisor.submit(Shutdown())
        instance.close()
        instance.supervisor.join(10)
