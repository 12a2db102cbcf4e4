"""The per-model settings dialog: every override, checked as typed, with a live plan preview.

Each edit is parsed and validated at once (a sentence under the form says what is wrong);
aliases (comma or space separated) and the model's own idle timeout sit beside the
planner's overrides and, changed alone, apply without restarting the engine;
a valid set of overrides is planned off the GUI thread after a short pause in typing and
drawn as one bar per device (weights, KV cache, compute, other, free against the budget)
with the plan's decisions beside it. A preview that arrives after a newer edit is thrown
away. Apply stores the overrides and, when the model is running and the change needs a
restart, asks first and sends ApplyOverrides. The dialog never plans on the GUI thread.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QRectF, QSize, Qt, QTimer, Slot
from PySide6.QtGui import QColor, QPainter, QPalette
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QMessageBox,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from stoker.base.overrides import (
    FLASH_ATTN,
    KV_CACHE_TYPES,
    SPEC_SAMPLING,
    SPEC_TYPES,
    ModelOverrides,
    needs_restart,
)
from stoker.desktop.bridge import SnapshotBridge
from stoker.desktop.services import model_key, validate
from stoker.desktop.workers import run_in_background
from stoker.engines.ds4_launch import Ds4Plan
from stoker.fleet.commands import ApplyOverrides, Command
from stoker.fleet.snapshot import EngineState
from stoker.library.model_ids import Catalog, alias_problems
from stoker.planning.plan import DeviceMemory, LaunchPlan, PlanRefusal
from stoker.planning.speed import speed_text

GIB = 1024 ** 3
SEGMENTS = (("weights", "#4285f4"), ("KV cache", "#34a853"), ("compute", "#fbbc04"),
            ("other", "#a142f4"))

# field -> (label, kind, choices/hint). kind: int | choice | tri | text | args | names
FIELDS: tuple[tuple[str, str, str, tuple[str, ...] | str], ...] = (
    ("aliases", "Aliases (other names clients send)", "names", "e.g. gpt-4o-mini, chat"),
    ("idle_minutes", "Stop after idle (minutes)", "int", "0 never · empty: Settings"),
    ("ctx", "Context (tokens)", "int", "e.g. 8192"),
    ("slots", "Parallel slots", "int", "e.g. 1"),
    ("kv_type_k", "KV cache type K", "choice", KV_CACHE_TYPES),
    ("kv_type_v", "KV cache type V", "choice", KV_CACHE_TYPES),
    ("kv_unified", "Unified KV cache", "tri", ()),
    ("flash_attn", "Flash attention", "choice", FLASH_ATTN),
    ("gpu_layers", "GPU layers", "text", "a number, all or auto"),
    ("n_cpu_moe", "MoE experts on CPU (layers)", "int", "e.g. 8"),
    ("spec_type", "Speculative decoding", "choice", SPEC_TYPES),
    ("draft_model", "Draft model file", "text", "path to a .gguf"),
    ("draft_max", "Max draft tokens", "int", "e.g. 16"),
    ("spec_sampling", "Draft sampling", "choice", SPEC_SAMPLING),
    ("ds4_cache_gb", "ds4 expert cache (GB)", "int", "e.g. 32"),
    ("ds4_ssd_streaming", "ds4 SSD streaming", "tri", ()),
    ("swa_full", "Full sliding-window cache", "tri", ()),
    ("threads", "Threads", "int", "e.g. 8"),
    ("batch", "Batch size", "int", "e.g. 2048"),
    ("ubatch", "Micro-batch size", "int", "e.g. 512"),
    ("extra_args", "Extra engine arguments", "args", "e.g. --temp 0.6"),
)
AUTO = "auto (planner decides)"


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / GIB:.2f} GiB" if n >= GIB / 10 else f"{n / 2**20:.0f} MiB"


class PlanBars(QWidget):
    """One stacked bar per device: what the plan puts there against what it may use."""

    ROW = 60

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("plan-bars")
        self.devices: tuple[DeviceMemory, ...] = ()
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumHeight(self.ROW + 26)

    def set_devices(self, devices: tuple[DeviceMemory, ...]) -> None:
        self.devices = tuple(devices)
        self.setMinimumHeight(max(1, len(self.devices)) * self.ROW + 26)
        self.updateGeometry()
        self.update()

    def sizeHint(self) -> QSize:
        return QSize(420, max(1, len(self.devices)) * self.ROW + 26)

    def paintEvent(self, event) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        text = self.palette().color(QPalette.ColorRole.WindowText)
        free_color = self.palette().color(QPalette.ColorRole.Mid)
        width = self.width() - 8
        y = 2
        for dev in self.devices:
            parts = (dev.weights_bytes, dev.kv_bytes, dev.compute_bytes, dev.other_bytes)
            scale = max(dev.budget_bytes, dev.total_bytes, 1)
            p.setPen(text)
            over = dev.total_bytes > dev.budget_bytes
            p.drawText(QRectF(4, y, width, 16), Qt.AlignmentFlag.AlignLeft,
                       f"{dev.name}: {_gib(dev.total_bytes)} of {_gib(dev.budget_bytes)} budget"
                       + ("  (over budget)" if over else
                          f"  ·  {_gib(dev.budget_bytes - dev.total_bytes)} free"))
            bar = QRectF(4, y + 18, width, 16)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(free_color)
            p.drawRect(bar)
            x = bar.left()
            for (_label, color), n in zip(SEGMENTS, parts, strict=True):
                w = bar.width() * n / scale
                p.setBrush(QColor(color))
                p.drawRect(QRectF(x, bar.top(), w, bar.height()))
                x += w
            budget_x = bar.left() + bar.width() * dev.budget_bytes / scale
            p.setPen(QColor("#c5221f") if over else text)
            p.drawLine(int(budget_x), int(bar.top() - 2), int(budget_x), int(bar.bottom() + 2))
            p.setPen(text)
            p.drawText(QRectF(4, y + 36, width, 16), Qt.AlignmentFlag.AlignLeft,
                       "   ".join(f"{label} {_gib(n)}" for (label, _c), n in zip(SEGMENTS, parts, strict=True)
                                  if n))
            y += self.ROW
        x = 4
        for label, color in SEGMENTS + (("free", free_color.name()),):
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(QColor(color))
            p.drawRect(QRectF(x, y + 4, 10, 10))
            p.setPen(text)
            p.drawText(QRectF(x + 14, y, 90, 18), Qt.AlignmentFlag.AlignVCenter, label)
            x += 14 + p.fontMetrics().horizontalAdvance(label) + 16
        p.end()


class ModelSettingsDialog(QDialog):
    PREVIEW_DELAY_MS = 200

    def __init__(self, model_path: str, services, bridge: SnapshotBridge,
                 submit: Callable[[Command], None], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("model-settings-dialog")
        self.model_path = model_path
        self.setWindowTitle(f"Settings for {Path(model_path).stem}")
        self.setMinimumWidth(900)
        self._services = services
        self._bridge = bridge
        self._submit = submit
        self._stored = ModelOverrides()
        self._generation = 0  # bumped on every edit; previews of older ones are dropped
        self.previews_done = 0
        self.last_preview: LaunchPlan | Ds4Plan | PlanRefusal | None = None
        self.loading = True
        self.applied: ModelOverrides | None = None
        self._catalog: Catalog | None = None  # the other models' names, for alias clashes

        form_box = QGroupBox("Overrides (empty = Stoker decides)")
        form = QFormLayout(form_box)
        self.inputs: dict[str, QComboBox | QLineEdit] = {}
        for name, label, kind, hint in FIELDS:
            w: QComboBox | QLineEdit
            if kind in ("choice", "tri"):
                combo = QComboBox()
                combo.addItem(AUTO, None)
                for choice in (("on", "off") if kind == "tri" else hint):
                    combo.addItem(choice, (choice == "on") if kind == "tri" else choice)
                combo.currentIndexChanged.connect(self._edited)
                w = combo
            else:
                line = QLineEdit()
                line.setPlaceholderText(hint if isinstance(hint, str) else "")
                line.setClearButtonEnabled(True)
                line.textChanged.connect(self._edited)
                w = line
            w.setObjectName(f"override-{name}")
            self.inputs[name] = w
            form.addRow(label, w)
        self.errors = QLabel("")
        self.errors.setObjectName("override-errors")
        self.errors.setWordWrap(True)
        self.errors.setStyleSheet("color: #c5221f")
        form.addRow(self.errors)

        preview_box = QGroupBox("Plan preview")
        preview = QVBoxLayout(preview_box)
        self.preview_state = QLabel("Planning…")
        self.preview_state.setObjectName("preview-state")
        self.preview_state.setWordWrap(True)
        self.bars = PlanBars()
        self.decisions = QListWidget()
        self.decisions.setObjectName("preview-decisions")
        self.decisions.setWordWrap(True)
        preview.addWidget(self.preview_state)
        preview.addWidget(self.bars)
        preview.addWidget(QLabel("Decisions"))
        preview.addWidget(self.decisions, 1)

        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Apply
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.apply_button = self.buttons.button(QDialogButtonBox.StandardButton.Apply)
        self.apply_button.setObjectName("apply-overrides")
        self.apply_button.clicked.connect(self.apply)
        self.buttons.rejected.connect(self.reject)

        columns = QHBoxLayout()
        columns.addWidget(form_box, 0)
        columns.addWidget(preview_box, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(columns)
        layout.addWidget(self.buttons)

        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(self.PREVIEW_DELAY_MS)
        self._timer.timeout.connect(self.request_preview)
        run_in_background(lambda: services.load_overrides(model_path), self._got_overrides)
        run_in_background(services.catalog, self._got_catalog)

    # -- form <-> overrides ---------------------------------------------------------------
    def _got_overrides(self, overrides, error) -> None:
        if error is not None:
            self.errors.setText(f"Stored overrides could not be read: {error}")
            overrides = ModelOverrides()
        self._stored = overrides
        self.set_form(overrides)
        self.loading = False
        self._edited()

    def _got_catalog(self, catalog, error) -> None:
        if error is not None:  # clashes are then only logged by the gateway's own rescan
            return
        self._catalog = catalog
        aliases = self.inputs["aliases"]
        if isinstance(aliases, QLineEdit) and aliases.text().strip():
            self._edited()

    def set_form(self, o: ModelOverrides) -> None:
        for name, _label, kind, _hint in FIELDS:
            w = self.inputs[name]
            value = getattr(o, name)
            w.blockSignals(True)
            if isinstance(w, QComboBox):
                w.setCurrentIndex(max(0, w.findData(value)) if value is not None else 0)
            elif kind == "args":
                w.setText(shlex.join(value) if value else "")
            elif kind == "names":
                w.setText(", ".join(value))
            else:
                w.setText("" if value is None else str(value))
            w.blockSignals(False)

    def raw_values(self) -> tuple[dict, list[str]]:
        """The form as typed values, and a sentence for each field that is not even a value."""
        raw: dict = {}
        problems: list[str] = []
        labels = {name: label for name, label, _k, _h in FIELDS}
        for name, _label, kind, _hint in FIELDS:
            w = self.inputs[name]
            if isinstance(w, QComboBox):
                raw[name] = w.currentData()
                continue
            text = w.text().strip()
            if not text:
                raw[name] = () if kind in ("args", "names") else None
            elif kind == "int":
                try:
                    raw[name] = int(text.replace(",", "").replace("_", ""))
                except ValueError:
                    problems.append(f"{labels[name]} must be a whole number, not '{text}'.")
            elif kind == "args":
                try:
                    raw[name] = tuple(shlex.split(text))
                except ValueError as exc:
                    problems.append(f"{labels[name]} cannot be split into arguments ({exc}).")
            elif name == "gpu_layers":
                raw[name] = int(text) if text.lstrip("-").isdigit() else text
            else:
                raw[name] = text
        return raw, problems

    def current_overrides(self) -> tuple[ModelOverrides | None, tuple[str, ...]]:
        raw, problems = self.raw_values()
        if problems:
            return None, tuple(problems)
        try:
            overrides, errors = validate(raw)
        except Exception as exc:  # a validator crash must read as a problem, not kill the UI
            return None, (f"These overrides could not be checked: {exc}",)
        if not errors and overrides.aliases and self._catalog is not None:
            errors = alias_problems(self._catalog, model_key(self.model_path), overrides.aliases)
        return (None if errors else overrides), tuple(errors)

    @Slot()
    def _edited(self, *_args) -> None:
        if self.loading:
            return
        self._generation += 1
        overrides, errors = self.current_overrides()
        self.errors.setText("\n".join(errors))
        self.apply_button.setEnabled(overrides is not None)
        if overrides is not None:
            self.preview_state.setText("Planning…")
            self._timer.start()

    # -- preview --------------------------------------------------------------------------
    @Slot()
    def request_preview(self) -> None:
        overrides, errors = self.current_overrides()
        if overrides is None:
            return
        generation = self._generation
        services, path = self._services, self.model_path
        run_in_background(lambda: services.plan(path, overrides),
                          lambda result, error: self._got_preview(generation, result, error))

    def _got_preview(self, generation: int, result, error) -> None:
        if generation != self._generation:
            return  # the form changed since: a newer preview is on its way
        self.previews_done += 1
        self.decisions.clear()
        if error is not None:
            self.last_preview = None
            self.bars.set_devices(())
            self.preview_state.setText(f"No preview: {error}")
            return
        self.last_preview = result
        if isinstance(result, PlanRefusal):
            self.bars.set_devices(())
            self.preview_state.setText(f"Will not start: {result.reason}")
            for s in result.suggestions:
                self.decisions.addItem(f"Try: {s}")
        elif isinstance(result, Ds4Plan):
            residency = (f"SSD streaming, expert cache {result.cache_gb} GiB" if result.ssd_streaming
                         else "whole model in memory")
            self.preview_state.setText(
                f"ds4 on {result.backend} · ctx {result.ctx:,} · {residency} · reserves "
                f"{_gib(result.reservation_bytes)} ({result.estimate_source})")
            self.bars.set_devices(result.devices)
        else:
            kv = (result.kv_type_k if result.kv_type_k == result.kv_type_v
                  else f"{result.kv_type_k}/{result.kv_type_v}")
            self.preview_state.setText(
                f"ctx {result.ctx:,} · {result.slots} slot(s) · KV {kv} · flash attention "
                f"{result.flash_attn} · drafter {result.drafter.status} · {speed_text(result.decode_speed)}")
            self.bars.set_devices(result.devices)
        for d in result.decisions:
            self.decisions.addItem(f"{d.what}: {d.why}")

    # -- apply ----------------------------------------------------------------------------
    def model_is_running(self) -> bool:
        """Whether this model has an engine up (focused or beside others) that a restart would cut."""
        snap = self._bridge.latest()
        if snap is None:
            return False
        running = (EngineState.STARTING, EngineState.READY, EngineState.BACKOFF)
        me = model_key(self.model_path)
        return (any(e.model_path and model_key(e.model_path) == me and e.state in running
                    for e in snap.engines)
                or (snap.model_path is not None and model_key(snap.model_path) == me
                    and snap.state in running))

    def confirm_restart(self) -> bool:
        """Ask before a restart interrupts whoever is using the engine (tests replace this)."""
        answer = QMessageBox.question(
            self, "Restart the engine?",
            f"{Path(self.model_path).stem} is running. The new settings take effect when the "
            "engine restarts, which interrupts requests in flight. Restart now?")
        return answer == QMessageBox.StandardButton.Yes

    @Slot()
    def apply(self) -> None:
        overrides, errors = self.current_overrides()
        if overrides is None:
            self.errors.setText("\n".join(errors))
            return
        if overrides == self._stored:
            self.accept()
            return
        # Aliases and the idle timeout never need the engine restarted: no question asked.
        restart = (needs_restart(self._stored, overrides) and self.model_is_running()
                   and self.confirm_restart())
        services, path = self._services, self.model_path
        self.apply_button.setEnabled(False)

        def saved(_result, error) -> None:
            self.apply_button.setEnabled(True)
            if error is not None:
                self.errors.setText(f"Not saved: {error}")
                return
            self._stored = overrides
            self.applied = overrides
            self._submit(ApplyOverrides(path, overrides, restart=restart))
            self.accept()

        run_in_background(lambda: services.save_overrides(path, overrides), saved)
