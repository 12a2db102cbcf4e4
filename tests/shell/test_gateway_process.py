"""The gateway in a process of its own (stoker/gateway/process.py, gateway_child.py,
gateway_link.py): the link's framing and outbox, every edge of the supervisor's remote route
table, and the real child process: it serves, it is started again on the same port when it
dies, and it never outlives Stoker. The requests themselves (clients, streams, residency)
are tests/shell/test_gateway.py, which runs through this same process.
"""

from __future__ import annotations

import io
import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request

import psutil
import pytest

from stoker.fleet.commands import Route, Shutdown
from stoker.fleet.instance import Instance
from stoker.gateway.link import (
    CloseIfIdle,
    IdleAnswer,
    LinkClosed,
    Outbox,
    RouteClosed,
    RouteOpened,
    UsageChanged,
    read_frame,
    write_frame,
)
from stoker.gateway.process import RemoteRoutes
from stoker.gateway.routes import Routes
from tests.helpers.waiting import wait_until

from .test_faults import Stoker, gone_within, home, run_args, status_json  # noqa: F401 (fixture)


def never_prepare(model_path, attempt):
    raise AssertionError("nothing is loaded in this test")


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
    """An outbox stand-in that records what the table sends and can answer CloseIfIdle."""

    def __init__(self, routes: RemoteRoutes, answer: bool | None) -> None:
        self.sent: list = []
        self._routes, self._answer = routes, answer

    def put(self, message) -> None:
        self.sent.append(message)
        if isinstance(message, CloseIfIdle) and self._answer is not None:
            threading.Timer(0.01, self._routes.idle_answered,
                            args=(IdleAnswer(message.asked, self._answer),)).start()
        if isinstance(message, RouteClosed) and message.asked is not None and self._answer is not None:
            threading.Timer(0.01, self._routes.idle_answered, args=(IdleAnswer(message.asked, True),)).start()


def test_without_a_gateway_process_nothing_is_in_flight_so_close_if_idle_closes():
    routes = RemoteRoutes()
    routes.open(ROUTE, 1.0)
    assert routes.close_if_idle(ROUTE.key) is True and routes.route(ROUTE.key) is None


def test_attach_sends_every_open_route_and_opens_and_closes_follow():
    routes = RemoteRoutes()
    routes.open(ROUTE, 1.0)
    link = _Link(routes, True)
    routes.attach(link)
    assert link.sent == [RouteOpened(ROUTE, 1.0)]
    routes.close(ROUTE.key)
    routes.forget(ROUTE.key)
    assert link.sent[1:] == [RouteClosed(ROUTE.key, asked=1), RouteClosed(ROUTE.key, forget=True)]


def test_a_close_returns_once_the_gateway_process_has_closed_it_or_after_a_bound(monkeypatch):
    """The supervisor stops the engine right after `close`: the gateway process must have
    stopped leasing it by then (a request leased in between met a dying engine: a 502)."""
    monkeypatch.setattr("stoker.gateway.process.CLOSE_ACK_TIMEOUT_S", 0.3)
    routes = RemoteRoutes()
    routes.open(ROUTE, 1.0)
    answered: list[float] = []
    link = _Link(routes, True)
    original = routes.idle_answered
    routes.idle_answered = lambda m: (answered.append(time.monotonic()), original(m))
    routes.attach(link)
    routes.close(ROUTE.key)
    assert answered and time.monotonic() >= answered[0] and routes.route(ROUTE.key) is None
    routes.open(ROUTE, 2.0)
    routes.attach(_Link(routes, None))  # a gateway process that never answers
    started = time.monotonic()
    routes.close(ROUTE.key)
    assert 0.25 <= time.monotonic() - started < 2.0 and routes.route(ROUTE.key) is None


@pytest.mark.parametrize("busy", [False, True])
def test_close_if_idle_asks_the_gateway_process_and_follows_its_answer(busy):
    routes = RemoteRoutes()
    routes.open(ROUTE, 1.0)
    routes.attach(_Link(routes, answer=not busy))
    assert routes.close_if_idle(ROUTE.key) is (not busy)
    assert (routes.route(ROUTE.key) is None) is (not busy)


def test_no_answer_counts_as_busy(monkeypatch):
    monkeypatch.setattr("stoker.gateway.process.IDLE_ANSWER_TIMEOUT_S", 0.05)
    routes = RemoteRoutes()
    routes.open(ROUTE, 1.0)
    routes.attach(_Link(routes, answer=None))
    assert routes.close_if_idle(ROUTE.key) is False and routes.route(ROUTE.key) == ROUTE


def test_usage_comes_from_the_gateway_process_and_a_release_wakes_admission():
    routes = RemoteRoutes()
    routes.open(ROUTE, 1.0)
    routes.attach(_Link(routes, None))
    routes.usage_changed(UsageChanged(ROUTE.key, 3, None, released=False))
    assert routes.usage(ROUTE.key) == (3, 1.0) and not routes.changed.is_set()
    routes.usage_changed(UsageChanged(ROUTE.key, 2, 9.0, released=True))
    assert routes.usage(ROUTE.key) == (2, 9.0) and routes.changed.is_set()
    with pytest.raises(RuntimeError):
        routes.acquire(ROUTE.key)  # leases are the gateway process's


def test_when_the_gateway_process_goes_nothing_is_in_flight_and_a_waiting_ask_is_answered():
    routes = RemoteRoutes()
    routes.open(ROUTE, 1.0)
    link = _Link(routes, answer=None)
    routes.attach(link)
    routes.usage_changed(UsageChanged(ROUTE.key, 1, None, released=False))
    got: list[bool] = []
    asker = threading.Thread(target=lambda: got.append(routes.close_if_idle(ROUTE.key)))
    asker.start()
    # The question was sent: the asker is on the waiting path, not the no-gateway shortcut
    # (which answers yes without asking and would pass this test without testing it).
    assert wait_until(lambda: any(isinstance(m, CloseIfIdle) for m in link.sent), 10), link.sent
    routes.detach()
    asker.join(5)
    assert not asker.is_alive() and got == [True] and routes.usage(ROUTE.key)[0] == 0
    assert [m for m in link.sent if isinstance(m, CloseIfIdle)] == [CloseIfIdle(1, ROUTE.key)]  # asked once


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
    from stoker.fleet.snapshot import AppSnapshot, EngineState, EngineView
    from stoker.gateway.child import CatalogMirror, SupervisorMirror
    from stoker.gateway.link import SnapshotChanged
    from stoker.gateway.server import Gateway, GatewayConfig
    from stoker.library.model_ids import ModelKind, build_catalog

    box = Outbox(io.BytesIO(), "test-outbox")
    sup, catalog = SupervisorMirror(box), CatalogMirror(box)
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
