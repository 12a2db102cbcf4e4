"""The gateway in a process of its own (stoker/gateway/process.py, gateway_child.py,
gateway_link.py): the link's framing and outbox, every edge of the supervisor's remote route
table, and the real child process: it serves, it is started again on the same port when it
dies, and it never outlives Stoker. The requests themselves (clients, streams, residency)
are tests/shell/test_gateway.py, which runs through this same process.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import struct
import subprocess
import threading
import time
import urllib.error
import urllib.request
from typing import get_args

import psutil
import pytest

from stoker.fleet import commands as cmd
from stoker.fleet.commands import Route, Shutdown
from stoker.fleet.routes import Routes
from stoker.fleet.snapshot import AppSnapshot, EngineState
from stoker.fleet.supervisor import FunctionPreparer
from stoker.gateway.link import (
    CHILD_COMMANDS,
    PROTOCOL_VERSION,
    VERSION_MISMATCH_EXIT,
    ChildToParent,
    CloseIfIdle,
    CommandWanted,
    Hello,
    IdleAnswer,
    LinkClosed,
    OpenRoute,
    Outbox,
    ParentToChild,
    RouteClosed,
    RouteOpened,
    UsageChanged,
    read_frame,
    write_frame,
)
from stoker.gateway.process import GatewayProcess, RemoteRoutes, gateway_child_argv
from stoker.gateway.server import GatewayConfig, bind_sockets
from stoker.instance.instance import Instance
from stoker.library.model_ids import Catalog, ModelKind, build_catalog
from tests.helpers.waiting import wait_until

from .test_faults import Stoker, gone_within, home, run_args, status_json  # noqa: F401 (fixture)


def _never(model_path, attempt):
    raise AssertionError("nothing is loaded in this test")


never_prepare = FunctionPreparer(_never)


ROUTE = Route(key="/m/a.gguf", endpoint="http://127.0.0.1:1", engine_key="k", pid=1)


# ------------------------------------------------------------------ the link


def test_frames_round_trip_and_a_closed_or_foreign_stream_is_link_closed():
    buf = io.BytesIO()
    write_frame(buf, RouteOpened(ROUTE, 5.0))
    write_frame(buf, UsageChanged("k", 2, 3.0, False))
    buf.seek(0)
    assert read_frame(buf) == RouteOpened(ROUTE, 5.0)
    assert read_frame(buf) == UsageChanged("k", 2, 3.0, False)
    with pytest.raises(LinkClosed):
        read_frame(buf)  # end of file
    with pytest.raises(LinkClosed):
        read_frame(io.BytesIO(b"\xff\xff\xff\xff" + b"x" * 8))  # a length no Stoker frame has


class _SlowStream(io.RawIOBase):
    """A pipe whose reader is away until `go` is set: the sender must not wait on it.
    `writing` is set once the outbox's writer is inside a write, stuck on the pipe."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.writing = threading.Event()
        self.buf = io.BytesIO()

    def writable(self):
        return True

    def write(self, data):
        self.writing.set()
        self.go.wait(10)
        return self.buf.write(data)


def test_outbox_never_blocks_the_sender_and_keeps_only_the_latest_of_a_slot():
    stream = _SlowStream()
    box = Outbox(stream, "test-outbox")
    started = time.monotonic()
    box.put("first")  # the writer takes it and waits on the stream
    assert stream.writing.wait(5), "the outbox's writer never wrote"
    box.put("ordered")
    for n in range(100):
        box.put_latest("usage", n)
    box.put_latest("snapshot", "s")
    box.put_latest("usage", "last")  # re-inserted: slots keep the order they were last set in
    assert time.monotonic() - started < 0.5, "a sender waited on the pipe"
    stream.go.set()
    box.close()
    box._thread.join(5)
    stream.buf.seek(0)
    got = []
    while True:
        try:
            got.append(read_frame(stream.buf))
        except LinkClosed:
            break
    assert got == ["first", "ordered", "s", "last"]


def test_outbox_reports_a_broken_pipe_once_and_drops_what_follows():
    class Broken(io.RawIOBase):
        def writable(self):
            return True

        def write(self, data):
            raise BrokenPipeError("gone")

    closed = []
    box = Outbox(Broken(), "test-outbox", on_closed=lambda: closed.append(1))
    box.put("a")
    box._thread.join(5)
    box.put("b")
    assert closed == [1]


# ------------------------------------------------------------------ the supervisor's route table


class _Link:
    """An outbox stand-in that records what the table sends; `answer()` plays the gateway
    process answering every question sent so far (closed, or busy)."""

    def __init__(self, routes: RemoteRoutes) -> None:
        self.sent: list = []
        self._routes = routes

    def put(self, message) -> None:
        self.sent.append(message)

    def answer(self, closed: bool = True) -> None:
        for m in list(self.sent):
            if isinstance(m, CloseIfIdle):
                self._routes.idle_answered(IdleAnswer(m.asked, m.key, closed))
            elif isinstance(m, RouteClosed) and m.asked is not None:
                self._routes.idle_answered(IdleAnswer(m.asked, m.key, True))
        self.sent.clear()


def _hello(routes) -> Hello:
    return Hello(PROTOCOL_VERSION, 1, (), 1, api_key="k", catalog=Catalog(),
                 snapshot=AppSnapshot(seq=0, state=EngineState.STOPPED), tray_shown=None, routes=routes)


def _attached(*opened: Route) -> tuple[RemoteRoutes, _Link, list[int]]:
    routes = RemoteRoutes()
    woken: list[int] = []
    routes.wake = lambda: woken.append(1)
    for r in opened:
        routes.open(r, 1.0)
    link = _Link(routes)
    routes.attach(link, _hello)
    return routes, link, woken


def test_without_a_gateway_process_nothing_is_in_flight_so_close_if_idle_closes():
    routes = RemoteRoutes()
    routes.open(ROUTE, 1.0)
    assert routes.close_if_idle(ROUTE.key) is True and routes.route(ROUTE.key) is None


def test_attach_puts_hello_first_with_every_open_route_and_opens_and_closes_follow():
    routes, link, _ = _attached(ROUTE)
    (hello,) = link.sent
    assert isinstance(hello, Hello) and hello.routes == (OpenRoute(ROUTE, 1.0),) and hello.api_key == "k"
    link.sent.clear()
    routes.close(ROUTE.key)
    routes.close(ROUTE.key)  # already closed: nothing more to say
    routes.forget(ROUTE.key)
    assert link.sent == [RouteClosed(ROUTE.key, asked=1), RouteClosed(ROUTE.key, forget=True)]


def test_a_close_never_waits_and_the_stop_waits_for_its_confirmation_on_its_own_thread():
    """The supervisor stops the engine after `close`: the stopping thread waits until the
    gateway process has stopped leasing it (a request leased in between met a dying engine:
    a 502), within a bound when the gateway process does not answer."""
    routes, link, _ = _attached(ROUTE)
    started = time.monotonic()
    routes.close(ROUTE.key)
    assert time.monotonic() - started < 0.05 and routes.route(ROUTE.key) is None
    assert routes.wait_closed(ROUTE.key, 0.05) is False  # not confirmed yet
    threading.Timer(0.05, link.answer).start()
    assert routes.wait_closed(ROUTE.key, 5.0) is True
    assert routes.wait_closed("/m/never-open.gguf", 0.0) is True  # nothing to wait for


def test_close_if_idle_asks_without_waiting_and_the_answer_wakes_the_supervisor():
    routes, link, woken = _attached(ROUTE)
    link.sent.clear()
    started = time.monotonic()
    assert routes.close_if_idle(ROUTE.key) is False and time.monotonic() - started < 0.05
    assert routes.close_if_idle(ROUTE.key) is False  # asked once: no second question
    assert link.sent == [CloseIfIdle(1, ROUTE.key)]
    link.answer(closed=True)
    assert woken == [1] and routes.changed.is_set()
    assert routes.route(ROUTE.key) is None  # closed in the gateway: no load is answered with it
    assert routes.close_if_idle(ROUTE.key) is True  # the supervisor's next pass finds the answer


def test_a_busy_answer_keeps_the_route_and_the_next_pass_asks_again():
    routes, link, _ = _attached(ROUTE)
    link.sent.clear()
    assert routes.close_if_idle(ROUTE.key) is False
    link.answer(closed=False)
    assert routes.route(ROUTE.key) == ROUTE
    assert routes.close_if_idle(ROUTE.key) is False and link.sent == [CloseIfIdle(2, ROUTE.key)]


def test_an_unload_closes_first_then_waits_for_idle():
    """`stoker unload`: the route is closed at once, and the engine stops once the requests
    already in flight end (close_if_idle on a closed route)."""
    routes, link, _ = _attached(ROUTE)
    routes.close(ROUTE.key)
    assert routes.close_if_idle(ROUTE.key) is False
    link.answer()
    assert routes.close_if_idle(ROUTE.key) is True


def test_an_idle_close_the_supervisor_did_not_act_on_is_undone_after_a_whole_pass():
    """It asked for room, then the load that needed it was cancelled: the model stays, and
    must not stay closed to requests."""
    routes, link, _ = _attached(ROUTE)
    routes.close_if_idle(ROUTE.key)
    link.answer(closed=True)
    routes.settle()  # the pass the answer came in
    assert routes.route(ROUTE.key) is None and link.sent == []
    routes.settle()  # a whole pass that did not act on it
    assert routes.route(ROUTE.key) == ROUTE and [type(m) for m in link.sent] == [RouteOpened]


def test_usage_comes_from_the_gateway_process_and_a_release_wakes_admission():
    routes, _, _ = _attached(ROUTE)
    routes.usage_changed(UsageChanged(ROUTE.key, 3, None, released=False))
    assert routes.usage(ROUTE.key) == (3, 1.0) and not routes.changed.is_set()
    routes.usage_changed(UsageChanged(ROUTE.key, 2, 9.0, released=True))
    assert routes.usage(ROUTE.key) == (2, 9.0) and routes.changed.is_set()
    assert not hasattr(routes, "acquire")  # leases are the gateway process's: no method that raises


def test_when_the_gateway_process_goes_nothing_is_in_flight_and_every_wait_ends():
    routes, link, woken = _attached(ROUTE)
    routes.usage_changed(UsageChanged(ROUTE.key, 1, None, released=False))
    assert routes.close_if_idle(ROUTE.key) is False
    other = Route(key="/m/b.gguf", endpoint="http://127.0.0.1:2", engine_key="k", pid=2)
    routes.open(other, 1.0)
    routes.close(other.key)
    routes.detach()
    assert routes.wait_closed(other.key, 0.0) is True and woken == [1]
    assert routes.usage(ROUTE.key)[0] == 0 and routes.close_if_idle(ROUTE.key) is True
    link.answer()  # answers from the process that has gone are void
    assert routes.route(ROUTE.key) is None


def test_the_gateway_side_table_reports_each_lease_and_release():
    seen = []
    routes = Routes(clock=lambda: 7.0, on_usage=lambda *a: seen.append(a))
    routes.open(ROUTE, 1.0)
    lease = routes.acquire(ROUTE.key)
    assert routes.close_if_idle(ROUTE.key) is False  # a request in flight holds it
    routes.release(lease)
    assert seen == [(ROUTE.key, 1, 1.0, False), (ROUTE.key, 0, 7.0, True)]


# ------------------------------------------------------------------ the real child process


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_the_gateway_serves_from_its_own_process_and_comes_back_on_the_same_port(stoker_home):
    instance = Instance(never_prepare, port=0).start()
    try:
        first = instance.gateway.pid
        assert first is not None and first != os.getpid()
        assert "stoker.gateway.child" in " ".join(psutil.Process(first).cmdline())
        assert _get(instance.url + "/health")[0] == 200
        status = json.loads(_get(instance.url + "/stoker/v1/status")[1])
        assert status["gateway"]["pid"] == first and status["running"] is True
        assert instance.status()["gateway"]["pid"] == first
        os.kill(first, signal.SIGKILL)

        def serving_again() -> bool:
            if instance.gateway.pid in (None, first):
                return False
            try:
                return _get(instance.url + "/health")[0] == 200
            except OSError:
                return False

        assert wait_until(serving_again, 30), "the gateway process was not started again"
        again = instance.gateway.pid
        assert again != first
        assert json.loads(_get(instance.url + "/v1/models")[1])["object"] == "list"
    finally:
        instance.supervisor.submit(Shutdown())
        instance.close()
        instance.supervisor.join(10)
    assert gone_within(again, 5.0), "the gateway process outlived Instance.close()"


@pytest.mark.usefixtures("home")
def test_the_gateway_process_never_outlives_a_kill_9_of_stoker(demo_model):
    run = Stoker(*run_args(demo_model))
    try:
        run.wait_line("ready: ")
        gateway_pid = status_json()["gateway"]["pid"]
        assert gateway_pid and gateway_pid != run.proc.pid
        run.proc.kill()
        run.proc.wait()
        assert gone_within(gateway_pid, 5.0), "the gateway process outlived a kill -9 of Stoker"
    finally:
        run.close()


def test_a_request_naming_no_model_goes_to_a_loaded_model_of_the_kind_it_needs():
    """The most recently used READY engine answers a model-less request, but a chat never
    lands on a loaded embedding (or image) engine, however recently that one was used."""
    from stoker.fleet.snapshot import EngineView
    from stoker.gateway.child import CatalogMirror, SupervisorMirror
    from stoker.gateway.link import SnapshotChanged
    from stoker.gateway.server import Gateway, GatewayConfig
    from stoker.library.model_ids import ModelKind, build_catalog

    box = Outbox(io.BytesIO(), "test-outbox")
    sup, catalog = SupervisorMirror(box, _hello(())), CatalogMirror(box)
    built, _ = build_catalog([("/m/chat.Q4_0.gguf", "chat.Q4_0.gguf", ModelKind.CHAT, "folder"),
                              ("/m/bert.F16.gguf", "bert.F16.gguf", ModelKind.EMBEDDING, "folder")])
    catalog.changed(built)
    engines = (EngineView("chat:q4_0", "/m/chat.Q4_0.gguf", EngineState.READY, last_used_at=1.0),
               EngineView("bert:f16", "/m/bert.F16.gguf", EngineState.READY, last_used_at=2.0))
    sup.snapshot_changed(SnapshotChanged(AppSnapshot(seq=1, state=EngineState.READY, engines=engines,
                                                     model_path="/m/bert.F16.gguf"), None))
    gw = Gateway(sup, catalog, GatewayConfig(0), status=dict)
    assert gw._default_model(ModelKind.CHAT) == "/m/chat.Q4_0.gguf"
    assert gw._default_model(ModelKind.EMBEDDING) == "/m/bert.F16.gguf"
    assert gw._default_model(None) == "/m/bert.F16.gguf"  # /tokenize, /props: any kind, the latest
    sup.snapshot_changed(SnapshotChanged(AppSnapshot(seq=2, state=EngineState.STOPPED,
                                                     model_path="/m/bert.F16.gguf"), None))
    assert gw._default_model(ModelKind.CHAT) is None  # nothing loaded, the last used cannot chat
    box.close()


# ------------------------------------------------------------------ the protocol


class _FakeSupervisor:
    """What GatewayProcess reads of the supervisor, recording what it is asked to do."""

    def __init__(self) -> None:
        self.submitted: list = []

    def snapshot(self) -> AppSnapshot:
        return AppSnapshot(seq=1, state=EngineState.STOPPED)

    def subscribe(self, callback):
        return lambda: None

    def submit(self, command) -> None:
        self.submitted.append(command)


class _FakeCatalog:
    def __init__(self, catalog: Catalog) -> None:
        self.current = catalog

    def on_change(self, callback):
        return lambda: None

    def refresh(self) -> Catalog:
        return self.current


def _gateway_process(catalog: Catalog | None = None, key: str | None = "secret"):
    sockets = bind_sockets(0, ("127.0.0.1",))
    sup = _FakeSupervisor()
    gp = GatewayProcess(sup, _FakeCatalog(catalog or Catalog()), RemoteRoutes(),
                        GatewayConfig(sockets[0].getsockname()[1]),
                        sockets=sockets, tray_shown=lambda: None, api_key=lambda: key)
    return gp, sup


def test_no_request_is_answered_without_the_key_while_a_large_catalog_is_handed_over():
    """Issue 21 point 4: the key came after the catalog, and 50 of 50 keyless requests sent
    during a large catalog's hand-over were answered. Now the key is inside Hello and the
    child serves nothing before it."""
    catalog, _ = build_catalog([(f"/m/model-{i}.Q4_0.gguf", f"model-{i}.Q4_0.gguf", ModelKind.CHAT, "folder")
                                for i in range(20000)])
    gp, _ = _gateway_process(catalog)
    answers: list[int] = []
    sent_at: list[float] = []

    def keyless() -> None:
        sent_at.append(time.monotonic())
        try:
            with urllib.request.urlopen(gp.url + "/v1/models", timeout=60) as resp:
                answers.append(resp.status)
        except urllib.error.HTTPError as exc:
            answers.append(exc.code)

    try:
        gp.start()
        askers = [threading.Thread(target=keyless) for _ in range(50)]
        for t in askers:
            t.start()
        gp.wait_ready(60)
        ready_at = time.monotonic()
        for t in askers:
            t.join(60)
    finally:
        gp.stop()
    assert len(sent_at) == 50 and max(sent_at) < ready_at  # every one sent during the hand-over
    assert answers.count(200) == 0 and answers == [401] * 50


def _child() -> subprocess.Popen:
    return subprocess.Popen(gateway_child_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _one_sentence(proc: subprocess.Popen) -> str:
    lines = [line for line in proc.stderr.read().decode().splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def test_a_hello_of_another_protocol_version_is_one_sentence_and_the_child_exits():
    proc = _child()
    write_frame(proc.stdin, dataclasses.replace(_hello(()), version=PROTOCOL_VERSION + 1))
    proc.stdin.close()
    assert proc.wait(60) == VERSION_MISMATCH_EXIT
    line = _one_sentence(proc)
    assert f"protocol {PROTOCOL_VERSION + 1}" in line and "not the same version" in line


def test_a_first_message_the_child_cannot_read_is_the_same_sentence():
    proc = _child()
    data = b"cstoker.gateway.link\nHelloFromTheFuture\n."  # a class this version does not have
    proc.stdin.write(struct.pack(">I", len(data)) + data)
    proc.stdin.close()
    assert proc.wait(60) == VERSION_MISMATCH_EXIT
    assert "not the same version" in _one_sentence(proc)


def test_the_parent_stops_restarting_a_child_of_another_version(monkeypatch, caplog):
    gp, _ = _gateway_process()
    monkeypatch.setattr("stoker.gateway.process.PROTOCOL_VERSION", PROTOCOL_VERSION + 1)
    try:
        gp.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "it is not started again" not in caplog.text:
            time.sleep(0.05)  # paces the poll of the log for the parent's refusal
        assert "it is not started again" in caplog.text and gp.pid is None
    finally:
        gp.stop()


def test_only_the_allowlisted_commands_from_the_child_reach_the_supervisor(caplog):
    gp, sup = _gateway_process()
    box = _Link(RemoteRoutes())
    try:
        gp._dispatch(CommandWanted(cmd.Stop()), box)  # Stop is a command, but not one the gateway may ask
        gp._dispatch(CommandWanted(cmd.EnsureModel(model_path="/m/a.gguf", ticket=1, answer=print)), box)
        gp._dispatch("a string", box)  # not a message at all
        assert sup.submitted == []
        assert caplog.text.count("refused a command from the gateway process") == 2
        assert "refused a message from the gateway process: str" in caplog.text
        gp._dispatch(CommandWanted(cmd.CancelEnsure(("gateway", 1))), box)
        gp._dispatch(CommandWanted(cmd.CancelRender(model_path="/m/a.gguf", reason="left")), box)
        gp._dispatch(CommandWanted(cmd.KeepAlive("/m/a.gguf", 60.0)), box)  # a request's keep_alive
        assert sup.submitted == [cmd.CancelEnsure(("gateway", 1)), cmd.CancelRender("/m/a.gguf", "left"),
                                 cmd.KeepAlive("/m/a.gguf", 60.0)]
    finally:
        for s in gp._sockets:
            s.close()


def test_each_side_has_one_union_and_every_message_is_in_exactly_one():
    parent, child = set(get_args(ParentToChild)), set(get_args(ChildToParent))
    assert not parent & child and Hello in parent and IdleAnswer in child
    assert set(CHILD_COMMANDS) == {cmd.CancelEnsure, cmd.CancelRender, cmd.KeepAlive, cmd.UnloadModel,
                                   cmd.WidenContext}
