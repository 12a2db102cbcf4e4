"""The tray's resident-model lines and their Load / Unload / Pin actions, the Models ▸
submenu's Switch and Load beside, and Copy endpoint: against a fake supervisor that
publishes snapshots the way the multi-model supervisor does."""

from __future__ import annotations

import time

from PySide6.QtGui import QGuiApplication

from stoker.desktop.app import StokerApp
from stoker.desktop.services import model_key
from stoker.fleet.commands import LoadModel, PinModel, SwitchModel, UnloadModel
from stoker.fleet.snapshot import EngineState, EngineView
from tests.ui.fakes import FakeServices, entries, grab_menus

MIB = 2 ** 20


def view(path, state=EngineState.READY, **kw):
    base = dict(model_id=path.rsplit("/", 1)[-1].removesuffix(".gguf") + ":q4_1",
                model_path=path, state=state, backend="cpu", ctx=2048)
    base.update(kw)
    return EngineView(**base)


def app(qtbot, fake_supervisor, tmp_path, *paths):
    stoker = StokerApp(fake_supervisor, FakeServices(tmp_path, entries(*paths)))
    assert stoker.tray.show()
    qtbot.waitUntil(lambda: len(stoker.models) == len(paths), timeout=2000)
    return stoker


def published(qtbot, stoker, snap):
    qtbot.waitUntil(lambda: getattr(stoker.bridge.latest(), "seq", 0) == snap.seq, timeout=2000)
    stoker.tray.rebuild_menu()
    return stoker.tray


def test_each_resident_model_has_a_line_with_state_bytes_and_idle_time(qtbot, fake_supervisor,
                                                                       tmp_path, screenshots):
    a, b, c = (model_key(str(tmp_path / n)) for n in ("a.gguf", "b.gguf", "c.gguf"))
    stoker = app(qtbot, fake_supervisor, tmp_path, a, b, c)
    now = time.time()
    snap = fake_supervisor.publish_engines(
        view(a, bytes_by_device=(("CPU", 180 * MIB),), last_used_at=now - 200,
             idle_timeout_s=300.0, plan_summary="ctx 2,048 · 1 slot · KV f16"),
        view(b, EngineState.STARTING, bytes_by_device=(("CUDA0", 3 * 1024 * MIB), ("CPU", 90 * MIB)),
             pinned=True),
        view(c, EngineState.STOPPED, queued="waiting for a.gguf's request to end"),
        plan_summary="ctx 2,048 · 1 slot · KV f16")
    tray = published(qtbot, stoker, snap)

    line_a = tray.find_action(f"engine:{a}").text()
    assert tray.find_action("info-headline").text() == "a:q4_1 on cpu: ready"
    assert line_a.startswith("a:q4_1: ready") and "CPU 180 MiB" in line_a
    assert "idle 3 min" in line_a
    line_b = tray.find_action(f"engine:{b}").text()
    assert "loading" in line_b and "CUDA0 3.00 GiB" in line_b and "CPU 90 MiB" in line_b
    assert "pinned" in line_b and "idle" not in line_b  # a load is never idle time
    assert "waiting for room" in tray.find_action(f"engine:{c}").text()
    details_a = [x.text() for x in tray.find_action(f"engine:{a}").menu().actions()]
    assert "Unloads after 5 min without requests" in details_a
    details_c = [x.text() for x in tray.find_action(f"engine:{c}").menu().actions()]
    assert "waiting for a.gguf's request to end" in details_c
    assert "3 models loaded" in tray.tray.toolTip()

    # Open the first model's submenu as a user would: a screenshot of both levels.
    from PySide6.QtCore import QPoint

    tray.menu.popup(QPoint(40, 40))
    qtbot.waitUntil(tray.menu.isVisible, timeout=5000)
    engine_menu = tray.find_action(f"engine:{a}")
    tray.menu.setActiveAction(engine_menu)
    qtbot.waitUntil(lambda: engine_menu.menu().isVisible(), timeout=5000)
    qtbot.wait(200)
    assert grab_menus(tray.menu, engine_menu.menu()).save(str(screenshots / "tray-menu-engines.png"))
    tray.menu.hide()

    # Ready: Unload and Pin act, Load has nothing to do; loading: Unload cancels it.
    tray.rebuild_menu()
    assert not tray.find_action(f"load:{a}").isEnabled()
    tray.find_action(f"unload:{a}").trigger()
    pin_a = tray.find_action(f"pin:{a}")
    assert pin_a.isCheckable() and not pin_a.isChecked()
    pin_a.trigger()
    pin_b = tray.find_action(f"pin:{b}")
    assert pin_b.isChecked()
    pin_b.trigger()
    tray.find_action(f"unload:{c}").trigger()
    assert fake_supervisor.commands == [UnloadModel(a), PinModel(a, True), PinModel(b, False),
                                        UnloadModel(c)]

    # A failed model can be loaded again from its line.
    snap = fake_supervisor.publish_engines(
        view(a, EngineState.FAILED, last_error="the engine ran out of memory while loading"))
    tray = published(qtbot, stoker, snap)
    load_a = tray.find_action(f"load:{a}")
    assert load_a.isEnabled()
    assert "the engine ran out of memory while loading" in [
        x.text() for x in tray.find_action(f"engine:{a}").menu().actions()]
    load_a.trigger()
    assert fake_supervisor.commands[-1] == LoadModel(a)

    # Its settings open from its own line.
    tray.find_action(f"engine-settings:{a}").trigger()
    assert a in stoker.model_dialogs
    stoker.model_dialogs[a].close()


def test_models_submenu_switches_or_loads_beside(qtbot, fake_supervisor, tmp_path):
    a, b, c = (model_key(str(tmp_path / n)) for n in ("a.gguf", "b.gguf", "c.gguf"))
    stoker = app(qtbot, fake_supervisor, tmp_path, a, b, c)
    snap = fake_supervisor.publish_engines(view(a), view(b, EngineState.STARTING))
    tray = published(qtbot, stoker, snap)

    assert tray.find_action("model:" + a).isChecked()  # the focused model
    assert tray.find_action("model:" + b).text().endswith("· loaded")
    assert not tray.find_action("load-beside:" + a).isEnabled()  # resident already
    assert not tray.find_action("load-beside:" + b).isEnabled()
    tray.find_action("load-beside:" + c).trigger()
    # a runs beside b: switching to a still does something (b unloads), and to c too.
    tray.find_action("model:" + a).trigger()
    tray.find_action("model:" + c).trigger()
    assert fake_supervisor.commands == [LoadModel(c), SwitchModel(a), SwitchModel(c)]

    # a alone and ready: a switch to it would do nothing, so none is sent.
    snap = fake_supervisor.publish_engines(view(a))
    tray = published(qtbot, stoker, snap)
    tray.find_action("model:" + a).trigger()
    assert fake_supervisor.commands[-1] == SwitchModel(c)


def test_copy_endpoint_copies_the_gateway_base_url_whenever_a_gateway_runs(qtbot, fake_supervisor,
                                                                           tmp_path):
    stoker = app(qtbot, fake_supervisor, tmp_path, str(tmp_path / "a.gguf"))
    # Nothing loaded yet: the gateway answers (and loads on demand), so the URL is useful.
    snap = fake_supervisor.publish_engines(gateway_url="http://127.0.0.1:7857")
    tray = published(qtbot, stoker, snap)
    copy = tray.find_action("action-copy-endpoint")
    assert copy.isEnabled() and copy.text() == "Copy endpoint (http://127.0.0.1:7857/v1)"
    copy.trigger()
    assert QGuiApplication.clipboard().text() == "http://127.0.0.1:7857/v1"
    # Without a gateway there is no endpoint a client could use (engine ports need its key).
    snap = fake_supervisor.publish_engines(view(str(tmp_path / "a.gguf")), gateway_url=None,
                                           endpoint="http://127.0.0.1:40001")
    tray = published(qtbot, stoker, snap)
    assert not tray.find_action("action-copy-endpoint").isEnabled()


def test_a_rendering_image_engine_shows_its_progress_and_cancel_stops_it(qtbot, fake_supervisor, tmp_path):
    """sd-server cannot cancel a render it started: the tray's Cancel render sends
    CancelRender, which the supervisor carries out by stopping that engine."""
    from stoker.fleet.commands import CancelRender

    img = model_key(str(tmp_path / "flux-dit.gguf"))
    stoker = app(qtbot, fake_supervisor, tmp_path, img)
    snap = fake_supervisor.publish_engines(
        view(img, engine_kind="sd-server", in_flight=1, can_cancel=True,
             progress="rendering step 3 of 20 (1.20 s per step)", plan_summary="sd-server, 4 steps, cpu"))
    tray = published(qtbot, stoker, snap)
    assert "rendering step 3 of 20" in tray.find_action(f"engine:{img}").text()
    tray.find_action(f"cancel:{img}").trigger()
    assert fake_supervisor.commands[-1] == CancelRender(img, "cancelled in the tray")
    # Once it is no longer rendering there is nothing to cancel.
    snap = fake_supervisor.publish_engines(view(img, engine_kind="sd-server"))
    tray = published(qtbot, stoker, snap)
    assert tray.find_action(f"cancel:{img}") is None
