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
    assert {"kind": "option", "text": "--b-max: no effect in mode disaggregated (no dynamic batching)"} in got["warnings"]


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


# -- every wrong type the fuzz corpus uses, into every argument of every API function (issue 41
# item 7, issue 44 item 5): a ConfigError naming the argument, never a raw TypeError / KeyError

def test_every_api_function_names_the_argument_of_every_wrong_type():
    import inspect

    from fuzzing import API_ACCEPTS, API_WRONG_TYPES, api_category
    from perfmodel import api
    from perfmodel.schema.errors import ConfigError

    base = {"predict": {"mode": "colocated", "gpus": 8}, "plan": {"gpus": 8}, "sweep": {"gpus": 8}}
    calls = 0
    for fname in ("predict", "plan", "sweep", "calibrate", "validate"):
        fn = getattr(api, fname)
        for arg, param in inspect.signature(fn).parameters.items():
            cat = api_category(str(param.annotation))
            for bad in API_WRONG_TYPES:
                if API_ACCEPTS[cat](bad):
                    continue
                with pytest.raises(ConfigError) as e:
                    fn(**{**base.get(fname, {}), arg: bad})
                field = e.value.field
                assert field == arg or field.startswith(f"{arg}."), (fname, arg, bad, field, e.value.message)
                calls += 1
    for fname in ("format_prediction", "format_plan", "format_validation"):
        for bad in [*API_WRONG_TYPES, {"mode": "colocated"}, {"gpus_budget": 8, "objective": "throughput"}]:
            with pytest.raises(ConfigError):
                getattr(api, fname)(bad)
            calls += 1
    assert calls > 300


def test_api_paths_numbers_and_node_as_python_gives_them(tmp_path):
    from perfmodel import api
    from perfmodel.schema.errors import ConfigError

    quiet = {"say": lambda line: None, "interval": False}
    by_path = api.predict(profile=ROOT / "profiles" / "pi05.json", mode="colocated", gpus=8, **quiet)
    assert by_path["throughput_env_steps_per_s"] == api.predict(mode="colocated", gpus=8, **quiet)[
        "throughput_env_steps_per_s"]
    with pytest.raises(ConfigError) as e:
        api.predict(mode="colocated", gpus=8, node={"cores": 96}, **quiet)
    assert e.value.field == "node.cores" and "cpu_cores_per_node" in e.value.message
    with pytest.raises(ConfigError) as e:
        api.predict(mode="disaggregated", gpus=8, ratio="\uff11:\uff11", **quiet)  # full-width digits
    assert "R:A" in e.value.message
    assert api.sweep(gpus=8, modes="colocated", jobs=1, **quiet)["rows"]


def test_api_extrapolation_warnings_are_records():
    from perfmodel import api

    p = api.predict(mode="rollout_async", gpus=64, say=lambda line: None)
    kinds = {w["kind"] for w in p["warnings"]}
    assert "extrapolation" in kinds
    text = api.format_prediction(p)
    assert all(f"warning       {w['text']}" in text or w["text"] in text for w in p["warnings"])


def test_api_calibrate_from_runs(tmp_path):
    pytest.importorskip("tensorboard")
    from test_hostile_input3 import _run

    from perfmodel import api
    from perfmodel.schema.errors import ConfigError

    run = _run(tmp_path / "run")
    said: list[str] = []
    doc = api.calibrate(runs=[run], out_dir=tmp_path / "out", max_evals=2, name="mine", say=said.append)
    assert doc["wrote"] == [str(tmp_path / "out" / "mine.json")] and doc["runs"][0]["steps_logged"] == 20
    with pytest.raises(ConfigError) as e:
        api.calibrate(runs=str(run))
    assert e.value.field == "runs"
