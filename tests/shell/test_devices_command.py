"""`stoker devices`: table and schema-1 JSON for this machine, a fake engine and a machine file."""

from __future__ import annotations

import json
import os
import stat

import pytest

from stoker.cli import main


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_json_for_this_machine(stoker_home, capsys):
    out = _json(capsys, ["devices", "--json"])
    assert out["schema"] == 1 and out["source"] == "probed"
    assert out["ram_total_bytes"] > 0 and out["logical_cores"] >= 1
    assert isinstance(out["devices"], list) and isinstance(out["notes"], list)


@pytest.mark.skipif(os.name == "nt", reason="fake engine is a shell script")
def test_engine_devices_in_table_and_json(stoker_home, tmp_path, capsys):
    engine = tmp_path / "llama-server"
    engine.write_text("#!/bin/sh\necho 'Available devices:'\n"
                      "echo '  Vulkan0: AMD Radeon RX 6800 XT (RADV NAVI21) (16368 MiB, 16000 MiB free)'\n"
                      "echo '  BLAS: OpenBLAS (0 MiB, 0 MiB free)'\n")
    engine.chmod(engine.stat().st_mode | stat.S_IXUSR)
    out = _json(capsys, ["devices", "--json", "--engine", str(engine)])
    (dev,) = out["devices"]
    assert dev["name"] == "Vulkan0" and dev["kind"] == "discrete" and dev["total_bytes"] == 16368 * 1024**2
    assert any("OpenBLAS" in n for n in out["notes"])
    assert main(["devices", "--engine", str(engine)]) == 0
    table = capsys.readouterr().out
    assert "Vulkan0" in table and "16.0 GiB" in table and "AMD Radeon RX 6800 XT (RADV NAVI21)" in table


def test_machine_file(tmp_path, capsys):
    f = tmp_path / "spark.json"
    f.write_text(json.dumps({"os": "linux", "arch": "arm64", "ram_total_gib": 128, "unified_memory": True,
                             "devices": [{"name": "CUDA0", "description": "NVIDIA GB10", "total_gib": 120,
                                          "free_gib": 110, "kind": "integrated", "compute_cap": "12.1"}]}))
    out = _json(capsys, ["devices", "--json", "--machine", str(f)])
    assert out["source"] == f"file:{f}" and out["unified_memory"] is True
    assert out["devices"][0]["compute_cap"] == "12.1"
    assert main(["devices", "--machine", str(f)]) == 0
    assert "unified" in capsys.readouterr().out


def test_bad_inputs_are_one_sentence_errors(tmp_path, capsys):
    assert main(["devices", "--machine", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stoker: could not read the machine file") and err.count("\n") == 1
    (tmp_path / "bad.json").write_text("[1]")
    assert main(["devices", "--machine", str(tmp_path / "bad.json")]) == 2
    assert "one JSON object" in capsys.readouterr().err
    assert main(["devices", "--engine", str(tmp_path / "no-engine")]) == 2
    assert "no engine binary" in capsys.readouterr().err
