"""The real LaunchPreparer: model → summary → machine → plan → argv, on the best engine build.

The supervisor calls it before every attempt (a restart may see less free memory and plan
smaller). It wires the modules other parts own: shell/models (which file), shell/gguf_io
(its header), shell/engines (which build), shell/probe (this machine), shell/store (saved
overrides and the last used model), shell/secrets (the API key), core/planner and
core/argv. They are imported when first needed so `stoker status` never pays for them.
It decides nothing itself; a problem comes back as a PreparationRefused sentence.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from app.core.overrides import ModelOverrides
from app.shell.supervisor import AttemptContext, PreparationRefused, PreparedLaunch

log = logging.getLogger(__name__)

HOST = "127.0.0.1"


def merge_overrides(base: ModelOverrides | None, top: ModelOverrides | None) -> ModelOverrides:
    """`top`'s set fields over `base` (the CLI's --ctx beats a saved ctx)."""
    base = base or ModelOverrides()
    if top is None:
        return base
    changes = {f.name: getattr(top, f.name) for f in dataclasses.fields(ModelOverrides)
               if getattr(top, f.name) not in (None, ())}
    return dataclasses.replace(base, **changes)


class RealPreparer:
    """Callable `(model_path, attempt) -> PreparedLaunch | PreparationRefused`."""

    def __init__(self, *, cli_overrides: ModelOverrides | None = None, engine: str | None = None,
                 startup_deadline_s: float = 180.0, remember_last_model: bool = True):
        self.cli_overrides = cli_overrides
        self.engine = engine
        self.startup_deadline_s = startup_deadline_s
        self.remember_last_model = remember_last_model

    def __call__(self, model_path: str | None, attempt: AttemptContext
                 ) -> PreparedLaunch | PreparationRefused:
        from app.cli import UserError

        try:
            return self._prepare(model_path, attempt)
        except UserError as exc:
            return PreparationRefused(model_path, str(exc))
        except (OSError, ValueError) as exc:
            return PreparationRefused(model_path, f"could not prepare the launch: {exc}")

    # -- steps

    def choose_model(self, model_path: str | None) -> Path:
        from app.shell.models import resolve_model
        from app.shell.paths import stoker_paths
        from app.shell.store import SettingsStore

        if model_path is None:
            last = SettingsStore(stoker_paths().config).load().last_model
            if last and Path(last).is_file():
                return Path(last)
        return resolve_model(model_path)

    def choose_engine(self):
        """The build to run: the one named on the command line, else the best usable one."""
        from app.cli import UserError
        from app.shell.engines import discover_engines

        builds = discover_engines(self.engine) if self.engine else discover_engines()
        usable = [b for b in builds if b.usable]
        if not usable:
            why = f" ({builds[0].status_reason})" if builds and builds[0].status_reason else ""
            raise UserError(f"no usable llama-server build was found{why}; run `stoker setup` or "
                            "set the engine path in the settings.")
        return usable[0]

    def _prepare(self, model_path: str | None, attempt: AttemptContext):
        from app.core.argv import build_launch_spec
        from app.core.planner import plan_launch
        from app.core.plan import PlanRefusal
        from app.shell.gguf_io import load_summary
        from app.shell.paths import stoker_paths
        from app.shell.probe import probe_machine
        from app.shell.store import OverridesStore, SettingsStore

        paths = stoker_paths()
        model = self.choose_model(model_path)
        build = self.choose_engine()
        summary = load_summary(model)
        machine = probe_machine(build.binary)
        saved = attempt.overrides or OverridesStore(paths.config).get(model)
        overrides = merge_overrides(saved, self.cli_overrides)
        plan = plan_launch(summary, machine, overrides)
        if isinstance(plan, PlanRefusal):
            hint = f" Try: {plan.suggestions[0]}" if plan.suggestions else ""
            return PreparationRefused(str(model), plan.reason + hint)
        api_key_entry = self._api_key_entry()
        spec = build_launch_spec(plan, binary=build.binary, port=attempt.port, host=HOST,
                                 log_file=None, api_key_entry=api_key_entry, backend=build.backend)
        secrets = self._secrets(spec)
        if self.remember_last_model and attempt.attempt == 0:
            try:
                SettingsStore(paths.config).update(last_model=str(model))
            except (OSError, ValueError):
                log.warning("could not remember the last used model", exc_info=True)
        return PreparedLaunch(spec=spec, model_path=str(model), plan=plan, build_id=build.id,
                              backend=build.backend, secrets=secrets,
                              startup_deadline_s=self.startup_deadline_s)

    @staticmethod
    def _api_key_entry() -> str | None:
        from app.shell import secrets

        return secrets.API_KEY_ENTRY if secrets.get_api_key() else None

    @staticmethod
    def _secrets(spec) -> tuple[tuple[str, str], ...]:
        from app.shell import secrets

        out = []
        for env_name, entry in spec.secret_env:
            value = secrets.get_api_key(entry)
            if value:
                out.append((env_name, value))
        return tuple(out)
