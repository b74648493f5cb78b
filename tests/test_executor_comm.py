"""Collective costs: the table calibration reads (fast, exact arithmetic) and ``executor
profile --comm`` measuring it with gloo on this machine (slow: starts Ray)."""

from __future__ import annotations

import json
import math

import pytest

from perfmodel.schema.collectives import CollectiveTable, bytes_factor, collectives_of, steps
from perfmodel.schema.errors import ConfigError
from tests.conftest import run_cli


def synthetic(alpha: float, bw: float, ranks=(2, 4), sizes=(1e6, 4e6), nodes: int = 1) -> dict:
    rows = []
    for op in ("all_reduce", "all_gather", "broadcast"):
        for r in ranks:
            for b in sizes:
                t = alpha * steps(op, r) + bytes_factor(op, r) * b / bw
                rows.append({"op": op, "ranks": r, "nodes": nodes, "bytes": int(b), "median_s": t,
                             "samples_s": [t, t]})
    return {"kind": "collective_costs", "backend": "gloo", "device": "cpu", "rows": rows}


def test_cost_interpolates_measured_points_and_fits_alpha_beta_elsewhere():
    table = CollectiveTable.from_dict(synthetic(alpha=1e-4, bw=2e9))
    # a measured (op, ranks) pair: linear between the measured sizes
    t1 = 1e-4 * 2 + 1.0 * 1e6 / 2e9
    t4 = 1e-4 * 2 + 1.0 * 4e6 / 2e9
    assert table.cost_s("all_reduce", 2.5e6, 2) == pytest.approx((t1 + t4) / 2)
    # an unmeasured rank count: the ring model recovers the generating alpha and bandwidth
    alpha, bw = table.alpha_beta("all_reduce", inter=False)
    assert alpha == pytest.approx(1e-4) and bw == pytest.approx(2e9)
    assert table.cost_s("all_reduce", 8e6, 16) == pytest.approx(1e-4 * 30 + (30 / 16) * 8e6 / 2e9)
    assert table.cost_s("broadcast", 1e6, 1) == 0.0
    assert table.has("all_gather", inter=False) and not table.has("all_gather", inter=True)
    with pytest.raises(KeyError):
        table.cost_s("all_reduce", 1e6, 4, nodes=2)  # no inter-node rows: calibration keeps fitting


def test_bad_tables_are_refused_with_the_field():
    d = synthetic(1e-4, 2e9)
    d["rows"][0]["median_s"] = math.nan
    with pytest.raises(ConfigError) as e:
        CollectiveTable.from_dict(d)
    assert e.value.field == "collectives.rows[0]"
    with pytest.raises(ConfigError):
        CollectiveTable.from_dict({"kind": "profile"})

    class P:  # a profile carrying the table where calibration looks for it
        extra = {"collectives": synthetic(1e-4, 2e9)}
    assert collectives_of(P()) is not None and collectives_of(object()) is None


def test_comm_options_are_checked_before_ray(tmp_path):
    r = run_cli("profile", "--comm", "--comm-ranks", "1", "--out", str(tmp_path / "c.json"), module="executor.cli")
    assert r.returncode == 2 and r.stderr.startswith("error: comm-ranks:"), r.stderr
    r = run_cli("profile", "--out", str(tmp_path / "c.json"), module="executor.cli")
    assert r.returncode == 2 and r.stderr.startswith("error: backbone:"), r.stderr


@pytest.mark.slow
def test_profile_comm_measures_gloo_collectives(tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "comm.json"
    base = tmp_path / "with_comm.json"
    r = run_cli("profile", "--comm", "--comm-ranks", "2", "--comm-mb", "0.1,1", "--repeats", "3",
                "--out", str(out), "--no-progress", module="executor.cli")
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "", r.stderr  # Ray's banners kept off stderr
    table = json.loads(out.read_text())
    assert {row["op"] for row in table["rows"]} == {"all_reduce", "all_gather", "broadcast"}
    assert all(len(row["samples_s"]) == 3 and row["median_s"] > 0 and row["nodes"] == 1 for row in table["rows"])
    t = CollectiveTable.from_dict(table)
    assert t.cost_s("all_reduce", 0.5e6, 2) > 0
    # into a profile: the profile still loads, the table is where calibration reads it
    r = run_cli("profile", "--comm", "--comm-ranks", "2", "--comm-mb", "0.1", "--repeats", "2",
                "--base-profile", "pi05_tiny_cpu", "--out", str(base), "--no-progress", module="executor.cli")
    assert r.returncode == 0, r.stderr
    from perfmodel.schema.profile import load_profile

    assert collectives_of(load_profile(str(base))).rows[0].ranks == 2
