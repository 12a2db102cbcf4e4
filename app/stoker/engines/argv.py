"""Turn a LaunchPlan into the exact llama-server b11434 command line and environment.

The order is fixed so tests can pin whole argv tuples and so `-lv 4` comes before any
flag that starts a backend while arguments are parsed (reference §3.1). The API key is
never written here: the spec names the variable (LLAMA_API_KEY) and the keyring entry the
shell reads at spawn time, so the key never shows in `ps`. Flags that b11434 removed
(`--no-mmap`, `--mlock`, `--draft-max` …) are never produced, and inherited LLAMA_ARG_*
variables are dropped so a stray environment cannot change the launch.

Pure: no files, no processes.
"""

from __future__ import annotations

import ipaddress

from stoker.base.overrides import extra_arg_problem
from stoker.engines.launch_spec import LaunchSpec
from stoker.library.model_ids import ModelKind
from stoker.planning.plan import LaunchPlan

# Inherited variables that would change the launch behind the plan's back.
DROP_ENV_PREFIXES = ("LLAMA_ARG_", "LLAMA_API_KEY", "AIP_")
API_KEY_ENV = "LLAMA_API_KEY"
# The secret entry meaning "a random key for this launch": the gateway holds it and sends
# it upstream, so no other local process can use the engine's private port.
PER_LAUNCH_KEY = "@per-launch@"
# XDG_CONFIG_HOME must point at an empty folder so no llama.cpp/config.ini applies
# (reference §0.8). The core cannot know the path; the shell replaces this marker with
# a folder it creates (e.g. <cache>/engine-config) before spawning.
CONFIG_DIR_MARKER = "@STOKER_EMPTY_CONFIG_DIR@"
NEVER_EMIT = frozenset({"--no-mmap", "--mlock", "--api-key", "--api-key-file", "--draft", "--draft-max",
                        "--draft-min", "--draft-n", "--draft-n-min"})


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_launch_spec(plan: LaunchPlan, *, binary: str, port: int, host: str = "127.0.0.1",
                      log_file: str | None = None, api_key_entry: str | None = None,
                      backend: str = "cpu", threads: int | None = None,
                      serves: ModelKind = ModelKind.CHAT, alias: str | None = None) -> LaunchSpec:
    """The argv and environment that run `plan`. Raises ValueError for a non-loopback host.

    `api_key_entry` names where the engine's key comes from (a keyring entry, or
    PER_LAUNCH_KEY: a random key made for this launch, which only the gateway knows); it
    reaches the engine as LLAMA_API_KEY, never on the command line. `serves` adds the flags
    an embedding or reranking model needs (`--embeddings`, `--rerank`). Unloading an idle
    model is the supervisor's job (it stops the process), so `--sleep-idle-seconds` is
    never passed.
    """
    if not is_loopback(host):
        raise ValueError(f"llama-server must listen on a loopback address such as 127.0.0.1, not {host}; "
                         f"Stoker does not expose engines to the network")
    if not 0 < port < 65536:
        raise ValueError(f"port must be between 1 and 65535, got {port}")
    bad = [a for a in plan.extra_args if a.split("=", 1)[0] in NEVER_EMIT]
    if bad:
        raise ValueError(f"extra argument {bad[0]} does not exist in llama-server b11434 or would put a "
                         f"secret on the command line; remove it from the model's extra_args")
    for a in plan.extra_args:  # also when the plan's overrides came from somewhere unchecked
        problem = extra_arg_problem(a)
        if problem is not None:
            raise ValueError(problem)
    argv: list[str] = [binary, "-lv", "4", "-m", plan.model_path, "--host", host, "--port", str(port),
                       "-c", str(plan.ctx), "-np", str(plan.slots),
                       "-kvu" if plan.kv_unified else "-no-kvu",
                       "-ctk", plan.kv_type_k, "-ctv", plan.kv_type_v, "-fa", plan.flash_attn]
    if plan.rpc_endpoints:
        # Workers' devices are offload devices even for a CPU build; --rpc registers them
        # before -ngl/-ts are read (reference §3.1: backends start while parsing).
        argv += ["--rpc", ",".join(plan.rpc_endpoints)]
        if plan.tensor_split:
            argv += ["-ts", ",".join(str(x) for x in plan.tensor_split)]
    if (backend != "cpu" or plan.rpc_endpoints) and plan.gpu_layers is not None:
        argv += ["-ngl", str(plan.gpu_layers)]
    if plan.cpu_moe:
        argv += ["--cpu-moe"]
    elif plan.n_cpu_moe:
        argv += ["--n-cpu-moe", str(plan.n_cpu_moe)]
    if plan.swa_full:
        argv += ["--swa-full"]
    d = plan.drafter
    if d.status in ("in", "forced") and d.spec_type and d.spec_type != "none":
        argv += ["--spec-type", d.spec_type]
        if d.draft_path:
            argv += ["-md", d.draft_path]
        if d.draft_max and (d.draft_path or d.spec_type == "draft-mtp"):
            argv += ["--spec-draft-n-max", str(d.draft_max)]
        if d.sampling:
            argv += ["--spec-draft-sampling", d.sampling]
    t = threads if threads is not None else plan.threads
    if t:
        argv += ["-t", str(t)]
    if plan.batch:
        argv += ["-b", str(plan.batch)]
    if plan.ubatch:
        argv += ["-ub", str(plan.ubatch)]
    if plan.mmproj_path:
        argv += ["--mmproj", plan.mmproj_path]
    if plan.cache_ram_mib is not None:
        # The prompt cache is host RAM the plan sized; the engine's 8192 MiB default is not.
        argv += ["-cram", str(plan.cache_ram_mib)]
    if serves is ModelKind.EMBEDDING:
        argv += ["--embeddings"]
    elif serves is ModelKind.RERANK:
        argv += ["--rerank"]
    if alias:  # responses name the model by its gateway id, not by the user's file path
        argv += ["--alias", alias]
    argv += ["--no-webui", "--metrics"]
    if log_file:
        argv += ["--log-file", log_file]
    argv += list(plan.extra_args)
    env = (("GGML_NO_BACKTRACE", "1"), ("XDG_CONFIG_HOME", CONFIG_DIR_MARKER))
    secret = ((API_KEY_ENV, api_key_entry),) if api_key_entry else ()
    return LaunchSpec(binary=binary, argv=tuple(argv), env=env, drop_env_prefixes=DROP_ENV_PREFIXES,
                      secret_env=secret, host=host, port=port, log_file=log_file)
