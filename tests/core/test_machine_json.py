"""Machine description files: units, defaults, and one sentence per mistake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stoker.planning.machine import machine_from_json

GIB, MIB = 1 << 30, 1 << 20


def test_the_documented_example():
    text = json.dumps({"os": "linux", "arch": "x86_64", "ram_total_gib": 32, "ram_available_gib": 28,
                       "physical_cores": 8, "unified_memory": False,
                       "devices": [{"name": "CUDA0", "description": "NVIDIA GeForce RTX 4070", "backend": "cuda",
                                    "total_mib": 12282, "free_mib": 11800}]})
    m = machine_from_json(text, "x.json")
    assert (m.ram_total_bytes, m.ram_available_bytes, m.physical_cores) == (32 * GIB, 28 * GIB, 8)
    (d,) = m.gpus
    assert (d.name, d.backend, d.total_bytes, d.free_bytes) == ("CUDA0", "cuda", 12282 * MIB, 11800 * MIB)
    assert m.source == "file:x.json" and not m.unified_memory


def test_bytes_mib_and_gib_are_all_accepted_and_backend_is_read_from_the_name():
    m = machine_from_json('{"ram_total_bytes": 1073741824, "ram_available_mib": 512,'
                          ' "devices": [{"name": "Vulkan0", "free_gib": 1.5}]}', "y")
    assert m.ram_total_bytes == GIB and m.ram_available_bytes == 512 * MIB
    assert m.devices[0].backend == "vulkan" and m.devices[0].free_bytes == int(1.5 * GIB)


def test_apple_silicon_defaults_to_unified():
    assert machine_from_json('{"os": "darwin", "arch": "arm64", "ram_total_gib": 16}', "z").unified_memory


@pytest.mark.parametrize("text, says", [
    ("{", "is not valid JSON"),
    ("[]", "must hold one JSON object"),
    ('{"os": "linux"}', "needs ram_total_gib"),
    ('{"ram_total_gib": 8, "ram_total_mib": 8192}', "gives ram_total twice"),
    ('{"ram_total_gib": -1}', "must be a non-negative number"),
    ('{"ram_total_gib": 8, "ram_available_gib": 9}', "ram_available is larger than ram_total"),
    ('{"ram_total_gib": 8, "os": "beos"}', "os must be linux, darwin or windows"),
    ('{"ram_total_gib": 8, "devices": [{"backend": "cuda"}]}', "needs a name"),
    ('{"ram_total_gib": 8, "devices": [{"name": "X0", "backend": "tpu"}]}', "backend must be one of"),
    ('{"ram_total_gib": 8, "devices": [{"name": "CUDA0", "total_gib": 8, "free_gib": 9}]}', "free memory is larger"),
    ('{"ram_total_gib": 8, "physical_cores": 0}', "physical_cores must be a whole number"),
])
def test_mistakes_are_one_sentence_naming_the_file(text, says):
    with pytest.raises(ValueError) as err:
        machine_from_json(text, "bad.json")
    assert says in str(err.value) and "bad.json" in str(err.value)


def test_every_shipped_machine_file_reads():
    for path in (Path(__file__).resolve().parents[1] / "data" / "machines").glob("*.json"):
        assert machine_from_json(path.read_text(), str(path)).ram_total_bytes > 0
