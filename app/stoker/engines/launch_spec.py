"""The exact process a plan becomes: argv, environment, where it listens.

`stoker/engines/argv.py` builds it from a `LaunchPlan`; `stoker/engines/process.py` starts it. The API key
never appears here: `secret_env` names the environment variable and the keyring entry
the shell reads it from at spawn time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LaunchSpec:
    binary: str
    argv: tuple[str, ...]  # argv[0] is the binary
    env: tuple[tuple[str, str], ...]  # set on top of a sanitised environment
    drop_env_prefixes: tuple[str, ...]  # inherited variables removed (LLAMA_ARG_ …)
    secret_env: tuple[tuple[str, str], ...]  # (ENV_NAME, keyring entry name)
    host: str
    port: int
    log_file: str | None = None
    # A RAM limit (a memory cgroup of the engine's own), Linux only: a test knob whose
    # overrun ends in the kernel's OOM kill, as on a full machine; None in normal use.
    memory_limit_bytes: int | None = None
    # The folder the engine starts in; None: Stoker's own. ds4 needs its binary's folder
    # (it loads its Metal shaders relative to the working directory).
    cwd: str | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"
