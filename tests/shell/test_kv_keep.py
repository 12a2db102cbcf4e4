"""A conversation survives an unload, on the real llama-server with the demo model and Gemma 3
270M: the supervisor saves the used slot before an idle unload or an eviction stops the
engine, restores it before the next READY, and the next turn's `cached_tokens` shows its
prefix came from the cache. A saved cache made under other KV settings is not restored (a
cold start, said in the log), and the disk budget holds.

Every wait is for an event: a snapshot state, an EnsureModel answer, a log record."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from stoker.base.overrides import ModelOverrides
from stoker.engines.launch import PreparedLaunch
from stoker.engines.slot_files import list_saved, slot_folder
from stoker.fleet.commands import EnsureModel, Restart, Shutdown, UnloadModel
from stoker.fleet.kv_keeper import KvKeeper
from stoker.fleet.launcher import RealPreparer
from stoker.fleet.snapshot import EngineState
from stoker.fleet.supervisor import FunctionPreparer, Supervisor, SupervisorOptions
from stoker.instance.instance import Instance
from stoker.planning.plan import DeviceMemory, DrafterChoice, LaunchPlan
from tests.shell.engine_helpers import demo_spec, engines_running
from tests.shell.engine_helpers import wait_until as wait

pytestmark = pytest.mark.engine
MIB = 1024 ** 2
BUDGET = 1000 * MIB
API_KEY = "test-per-launch-key"


def plan_of(mib: int, model: str) -> LaunchPlan:
    return LaunchPlan(model_path=model, ctx=2048, slots=1, kv_unified=False, kv_type_k="f16",
                      kv_type_v="f16", flash_attn="auto", gpu_layers=None, n_cpu_moe=None, cpu_moe=False,
                      swa_full=False, drafter=DrafterChoice("none", None, None, "none"),
                      devices=(DeviceMemory("CPU", BUDGET, mib * MIB, 0, 0),), decisions=())


class Records(logging.Handler):
    """The kv_keeper's log records, with a wait for one that says something."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self.guard = threading.Lock()  # not `lock`: logging.Handler holds its own while it emits

    def emit(self, record: logging.LogRecord) -> None:
        with self.guard:
            self.lines.append(record.getMessage())

    def has(self, text: str) -> bool:
        return self.count(text) > 0

    def count(self, text: str) -> int:
        with self.guard:
            return sum(text in line for line in self.lines)


@pytest.fixture
def records():
    handler = Records()
    logger = logging.getLogger("stoker.fleet.kv_keeper")
    old = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old)


@pytest.fixture(params=["demo", "gemma"])
def model(request, demo_model) -> Path:
    return demo_model if request.param == "demo" else request.getfixturevalue("gemma_model")


class Fleet:
    """A supervisor over models "a" and "b" (each a model file and a context; "a" and "b"
    do not fit together), with the KV settings the test can change between launches."""

    def __init__(self, binary: Path, models: dict[str, tuple[Path, int]], *, idle_s: float | None,
                 keeper: KvKeeper | None = None) -> None:
        self.models = models
        self.kv_type = "f16"
        self.idle_s = idle_s

        def prepare(key, attempt):
            path, ctx = self.models[key]
            spec = demo_spec(binary, path, ctx=ctx, port=attempt.port)
            argv = spec.argv + ("-ctk", self.kv_type, "-ctv", self.kv_type)
            if "gemma" in path.name:  # sliding-window layers: a restored slot is only used with the full window
                argv += ("--swa-full",)  # (slot_keep.worth_keeping; RealPreparer saves none without it)
            spec = type(spec)(**{**spec.__dict__, "argv": argv})
            return PreparedLaunch(spec=spec, model_path=str(path), plan=plan_of(600, key), backend="cpu",
                                  build_id="b11434-cpu", startup_deadline_s=120, idle_timeout_s=self.idle_s,
                                  secrets=(("LLAMA_API_KEY", API_KEY),), engine_key=API_KEY,
                                  keeps_conversations=True)

        self.sup = Supervisor(FunctionPreparer(prepare),
                              SupervisorOptions(stop_grace_s=5, kv_keeper=keeper)).start()
        self.ticket = 0

    def load(self, key: str) -> None:
        got: list = []
        self.ticket += 1
        self.sup.submit(EnsureModel(model_path=key, ticket=self.ticket, answer=got.append))
        assert wait(lambda: got, 180), f"{key} never became ready"
        assert got[0].route is not None, got[0].error

    def chat(self, key: str, messages: list[dict], max_tokens: int = 8) -> dict:
        """One request through a lease, as the gateway sends it (so idleness counts from its end)."""
        route = self.sup.routes.acquire(key)
        assert route is not None, f"{key} is not routable"
        try:
            resp = httpx.post(route.endpoint + "/v1/chat/completions", timeout=300,
                              headers={"Authorization": f"Bearer {route.engine_key}"},
                              json={"messages": messages, "max_tokens": max_tokens, "temperature": 0})
            resp.raise_for_status()
            return resp.json()
        finally:
            self.sup.routes.release(route)

    def resident(self) -> set[str]:
        return {e.model_path for e in self.sup.snapshot().engines}

    def close(self, binary: Path) -> None:
        self.sup.submit(Shutdown())
        assert self.sup.join(60)
        assert engines_running(binary) == []


def first_turn(n_facts: int) -> list[dict]:
    facts = " ".join(f"Fact {i}: the number {i * 7} has the digits of {i * 7 + 3}." for i in range(n_facts))
    return [{"role": "user", "content": facts + " Which fact is the largest number?"}]


def next_turn(first: list[dict], answer: dict) -> list[dict]:
    return first + [{"role": "assistant", "content": answer["choices"][0]["message"]["content"]},
                    {"role": "user", "content": "And the smallest?"}]


def cached(answer: dict) -> int:
    return answer["usage"]["prompt_tokens_details"]["cached_tokens"]


def test_the_conversation_is_restored_after_an_idle_unload(engine_binary, model, stoker_home, records):
    fleet = Fleet(engine_binary, {"a": (model, 2048)}, idle_s=1.0)
    try:
        fleet.load("a")
        turn1 = first_turn(30)
        answer1 = fleet.chat("a", turn1)
        n1 = answer1["usage"]["prompt_tokens"]
        assert n1 > 400
        assert wait(lambda: "a" not in fleet.resident(), 60), "the idle model was never unloaded"
        assert records.has("kept a's conversation: slot 0")
        saved = list_saved(slot_folder())
        assert len(saved) == 1 and saved[0].key is not None and saved[0].n_tokens >= n1
        fleet.load("a")
        assert records.has("restored a's conversation: slot 0")
        answer2 = fleet.chat("a", next_turn(turn1, answer1), max_tokens=1)
        # the whole first turn came from the restored cache: only the new turn was read
        assert cached(answer2) >= n1, answer2["usage"]
        assert answer2["timings"]["prompt_n"] < answer2["usage"]["prompt_tokens"] - n1 + 16
    finally:
        fleet.close(engine_binary)


def test_the_conversation_is_restored_after_an_eviction(engine_binary, model, demo_model, stoker_home, records):
    # "b" does not fit beside "a": loading it evicts the idle "a", and loading "a" evicts "b".
    fleet = Fleet(engine_binary, {"a": (model, 2048), "b": (demo_model, 1024)}, idle_s=None)
    try:
        fleet.load("a")
        turn1 = first_turn(30)
        answer1 = fleet.chat("a", turn1)
        n1 = answer1["usage"]["prompt_tokens"]
        fleet.load("b")
        assert fleet.resident() == {"b"}
        assert records.has("kept a's conversation: slot 0")
        assert not records.has("kept b's conversation")  # b never served a request: nothing to save
        fleet.load("a")
        assert fleet.resident() == {"a"}
        assert records.has("restored a's conversation: slot 0")
        answer2 = fleet.chat("a", next_turn(turn1, answer1), max_tokens=1)
        assert cached(answer2) >= n1, answer2["usage"]
    finally:
        fleet.close(engine_binary)
    # Stoker's own quit saves too: the second turn is on disk for the next start
    assert records.count("kept a's conversation: slot 0") == 2
    (saved,) = list_saved(slot_folder())
    assert saved.n_tokens is not None and saved.n_tokens > n1


def test_a_cache_saved_under_another_kv_type_is_not_restored(engine_binary, demo_model, stoker_home, records):
    fleet = Fleet(engine_binary, {"a": (demo_model, 2048)}, idle_s=None)
    try:
        fleet.load("a")
        turn1 = first_turn(30)
        answer1 = fleet.chat("a", turn1)
        fleet.kv_type = "q8_0"  # new settings, applied by a restart (as Apply does)
        fleet.sup.submit(Restart(model_path="a", reason="new settings for this model"))
        assert wait(lambda: records.has("kept a's conversation: slot 0"), 60)
        assert wait(lambda: records.has("a starts cold: its saved conversation does not fit this launch "
                                        "(the KV settings changed (kv_type_k f16 → q8_0, kv_type_v f16 → q8_0))"),
                    120)
        fleet.load("a")
        assert not records.has("restored a's conversation")
        answer2 = fleet.chat("a", next_turn(turn1, answer1), max_tokens=1)
        assert cached(answer2) == 0, answer2["usage"]
        # the f16 save is still there for a launch with the old settings
        assert len(list_saved(slot_folder())) == 1
    finally:
        fleet.close(engine_binary)


def test_the_disk_budget_is_kept_least_recently_used_first(engine_binary, demo_model, stoker_home, records):
    budget = {"bytes": 1 << 40}
    keeper = KvKeeper(budget_bytes=lambda: budget["bytes"])
    fleet = Fleet(engine_binary, {"a": (demo_model, 2048), "b": (demo_model, 1024)}, idle_s=None, keeper=keeper)
    try:
        fleet.load("a")
        fleet.chat("a", first_turn(20))
        fleet.load("b")  # evicts a: a's conversation is saved
        assert records.has("kept a's conversation")
        (saved_a,) = list_saved(slot_folder())
        # room for one save and a half: b's save must push a's out
        budget["bytes"] = saved_a.size_bytes * 3 // 2
        fleet.chat("b", first_turn(20))
        fleet.load("a")  # evicts b: b's conversation is saved, a's (older) is dropped
        assert records.has("kept b's conversation")
        assert wait(lambda: records.has("dropped 1 saved conversation slot(s)"), 30)
        left = list_saved(slot_folder())
        assert [s.name for s in left] != [saved_a.name] and len(left) == 1
        assert sum(s.size_bytes for s in left) <= budget["bytes"]
        assert not records.has("restored a's conversation")  # it was dropped: a starts cold
    finally:
        fleet.close(engine_binary)


def test_through_the_gateway_an_unload_and_an_on_demand_load_keep_the_conversation(
        engine_binary, demo_model, stoker_home, records):
    """The whole path a chat client sees: RealPreparer's plan (so its own decision to keep
    conversations), the gateway in its own process holding the leases, `stoker unload`, and
    the next turn loading the model on demand."""
    preparer = RealPreparer(engine=str(engine_binary), remember_last_model=False,
                            cli_overrides=ModelOverrides(ctx=2048, slots=1))
    inst = Instance(preparer, port=0, extra_models=(str(demo_model),),
                    options=SupervisorOptions(stop_grace_s=5)).start()

    def ask(messages, max_tokens):
        resp = httpx.post(inst.url + "/v1/chat/completions", timeout=300,
                          json={"model": "smollm2-135m-instruct:q4_1", "messages": messages,
                                "max_tokens": max_tokens, "temperature": 0})
        resp.raise_for_status()
        return resp.json()

    try:
        turn1 = first_turn(30)
        answer1 = ask(turn1, 8)  # loads the model on demand
        n1 = answer1["usage"]["prompt_tokens"]
        argv = inst.supervisor.snapshot().argv
        assert "--slot-save-path" in argv and argv[argv.index("--slot-save-path") + 1] == str(slot_folder())
        inst.supervisor.submit(UnloadModel(None))
        assert inst.supervisor.wait_for(lambda s: not s.engines or s.engines[0].state is EngineState.STOPPED, 60)
        assert records.has("kept smollm2-135m-instruct:q4_1's conversation: slot 0")
        answer2 = ask(next_turn(turn1, answer1), 1)  # loads it again, restored before READY
        assert records.has("restored smollm2-135m-instruct:q4_1's conversation: slot 0")
        assert cached(answer2) >= n1, answer2["usage"]
    finally:
        inst.supervisor.submit(Shutdown())
        assert inst.supervisor.join(60)
        inst.close()
    assert engines_running(engine_binary) == []


def test_an_engine_that_cannot_answer_the_save_is_stopped_without_waiting_long(
        engine_binary, demo_model, stoker_home, records):
    fleet = Fleet(engine_binary, {"a": (demo_model, 2048)}, idle_s=None)
    try:
        fleet.load("a")
        fleet.chat("a", first_turn(5))
        pid = fleet.sup.snapshot().engines[0].pid
        os.kill(pid, signal.SIGSTOP)  # frozen: it accepts the connection but answers nothing
        t0 = time.monotonic()
        fleet.sup.submit(UnloadModel("a"))
        assert wait(lambda: "a" not in fleet.resident(), 60)
        # the slot list's 2 s timeout, then the stop (SIGCONT + SIGTERM): never the save's whole bound
        assert time.monotonic() - t0 < 15
        assert records.has("a's conversation is not kept: its slots could not be listed")
        assert list_saved(slot_folder()) == ()
    finally:
        fleet.close(engine_binary)
