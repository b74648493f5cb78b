"""The Python API (perfmodel.api, issue 27 item 2 / issue 29 item 4): the functions behind the
commands return what the commands print with --json, raise ConfigError naming the option, and
examples/api_example.py runs as shown."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT, run_cli


def test_api_predict_is_what_predict_json_prints():
    from perfmodel import api

    got = api.predict(mode="streamer", gpus=8, ratio="1:1", gpu_hour_price=2.0, say=lambda line: None)
    r = run_cli("predict", "--mode", "streamer", "--gpus", "8", "--ratio", "1:1", "--gpu-hour-price", "2", "--json")
    assert r.returncode == 0, r.stderr
    assert got == json.loads(r.stdout)
    assert got["throughput_interval"]["low"] < got["throughput_env_steps_per_s"] < got["throughput_interval"]["high"]


def test_api_predict_warnings_go_to_say_and_into_the_result():
    from perfmodel import api

    said: list[str] = []
    got = api.predict(mode="disaggregated", gpus=8, ratio="1:1", b_max=64, interval=False, say=said.append)
    assert said == ["warning: --b-max: no effect in mode disaggregated (no dynamic batching)"]
    assert "--b-max: no effect in mode disaggregated (no dynamic batching)" in got["warnings"]


def test_api_bad_input_names_the_option():
    from perfmodel import api
    from perfmodel.schema.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        api.predict(mode="streamer", gpus=8, replications=0)
    assert e.value.field == "--replications"
    with pytest.raises(ConfigError) as e:
        api.plan(gpus=8, modes=["streamer", "warp"])
    assert e.value.field == "--modes"


def test_api_example_runs(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "api_example.py")], capture_output=True, text=True,
                       cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    m = re.match(r"rollout_async on 32 GPUs: ([\d.]+) env steps/s \(90% interval ([\d.]+)\.\.([\d.]+)\)", first)
    assert m, first
    p = json.loads(run_cli("predict", "--mode", "rollout_async", "--gpus", "32", "--json").stdout)
    assert m.groups() == (f"{p['throughput_env_steps_per_s']:.1f}", f"{p['throughput_interval']['low']:.1f}",
                          f"{p['throughput_interval']['high']:.1f}")
    assert "Best plans for exactly 32 GPUs by throughput:" in r.stdout and "#1 wins" in r.stdout


def test_docs_api_snippet_runs():
    """The snippet of docs/api.md runs as shown and prints the prediction's numbers."""
    text = (ROOT / "docs" / "api.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    thr, low, high = map(float, r.stdout.splitlines()[0].split())
    p = json.loads(run_cli("predict", "--mode", "rollout_async", "--gpus", "32", "--gpu-hour-price", "2.5",
                           "--json").stdout)
    assert (thr, low, high) == (p["throughput_env_steps_per_s"], p["throughput_interval"]["low"],
                                p["throughput_interval"]["high"])
    assert r.stdout.splitlines()[1].split() == [p["bottleneck"], str(p["dollars_per_million_env_steps"])]
