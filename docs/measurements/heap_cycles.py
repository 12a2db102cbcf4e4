"""The main process's anonymous memory across load-unload cycles of the demo model.

Starts Stoker's supervisor and gateway in this process (as `stoker bench soak` does), then N
times: load the demo model, two short chats through the gateway, unload, and print RssAnon
(Linux's /proc/self/status) once the engine is gone. Run it at two commits to compare:
    STOKER_HOME=... python docs/measurements/heap_cycles.py 10
"""
import json
import os
import sys
import time
import urllib.request

from stoker.base.secrets import get_api_key
from stoker.fleet import commands as cmd
from stoker.fleet.launcher import RealPreparer
from stoker.fleet.snapshot import EngineState
from stoker.fleet.supervisor import SupervisorOptions
from stoker.instance.instance import Instance
from stoker.library.models import resolve_model


def rss_anon_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no RssAnon")


def main(cycles: int) -> None:
    demo = resolve_model(None)
    key = os.path.realpath(demo)
    inst = Instance(RealPreparer(engine=None, remember_last_model=False, idle_timeout_s=0), port=0,
                    extra_models=(str(demo),), options=SupervisorOptions(stop_grace_s=5)).start()
    sup = inst.supervisor
    model_id = inst.catalog.id_for(key)
    api_key = get_api_key()
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    body = json.dumps({"model": model_id, "max_tokens": 8,
                       "messages": [{"role": "user", "content": "Say hi."}]}).encode()
    try:
        for i in range(cycles):
            sup.submit(cmd.LoadModel(key))
            if sup.wait_for(lambda s: any(e.model_path == key and e.state is EngineState.READY
                                          for e in s.engines), 180) is None:
                raise RuntimeError("the demo model did not become ready within 180 s")
            for _ in range(2):
                req = urllib.request.Request(inst.url + "/v1/chat/completions", data=body, headers=headers)
                urllib.request.urlopen(req, timeout=120).read()
            sup.submit(cmd.UnloadModel(key))
            if sup.wait_for(lambda s: not any(e.model_path == key for e in s.engines), 60) is None:
                raise RuntimeError("the demo model did not stop within 60 s")
            time.sleep(2)  # lets the stop's last work (the log, the kept conversation) finish
            print(f"cycle {i}: RssAnon {rss_anon_mib():.1f} MiB", flush=True)
    finally:
        inst.close()
        sup.submit(cmd.Shutdown())
        sup.join(30)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
