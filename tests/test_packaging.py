"""A normal (non-editable) install can predict: the wheel carries the bundled profiles and the
reference CSV as package data, and user profiles go to a user directory.

The wheel test builds a wheel from the tracked files, installs it with ``--no-deps`` into a fresh
venv outside the checkout whose dependencies come from this interpreter's site-packages (a path
line in a .pth file: no network, and no editable finder of this checkout), and runs the installed
``perfmodel`` script from a directory outside the checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tracked_copy(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split("\n")
    src = dest / "src"
    for f in files:
        if not f or not (ROOT / f).is_file():
            continue
        target = src / f
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((ROOT / f).read_bytes())
    return src


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the wheel is built from the tracked files")
    tmp = tmp_path_factory.mktemp("wheel")
    src = _tracked_copy(tmp)
    wheels = tmp / "wheels"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(wheels)], capture_output=True, text=True)
    if r.returncode:
        pytest.fail(f"building the wheel failed (needs setuptools >= 70.1, the test extra): {r.stderr[-2000:]}")
    (wheel,) = wheels.glob("vlaperf-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    fresh_site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                     check=True, capture_output=True, text=True).stdout.strip())
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                    "--ignore-installed", "-q", str(wheel)], check=True, capture_output=True, text=True)
    assert (fresh_site / "perfmodel" / "profiles" / "pi05.json").is_file()
    # Dependencies from this interpreter's site-packages, after the fresh venv's own.
    (fresh_site / "_deps_from_test.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VLAPERF_PROFILE_DIR", "XDG_DATA_HOME")}
    env["HOME"] = str(home)
    return env


def test_wheel_installed_outside_checkout_predicts(installed: Path, tmp_path: Path) -> None:
    env = _env(tmp_path)
    where = subprocess.run([str(installed / "bin" / "python"), "-c",
                            "import perfmodel.schema.profile as p; print(p.BUNDLED_DIR); print(p.BUNDLED_REFERENCE)"],
                           cwd=tmp_path, env=env, check=True, capture_output=True, text=True).stdout.split()
    assert all(str(installed) in w for w in where), where  # package data, not the checkout
    assert Path(where[1]).is_file()
    r = subprocess.run([str(installed / "bin" / "perfmodel"), "predict", "--mode", "streamer", "--gpus", "8",
                        "--json"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["mode"] == "streamer" and out["throughput_env_steps_per_s"] > 0
    r = subprocess.run([str(installed / "bin" / "perfmodel"), "validate", "--json"], cwd=tmp_path, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["points"]


def test_user_profile_dir_is_searched_first(tmp_path: Path, monkeypatch) -> None:
    from perfmodel.schema import profile as prof

    monkeypatch.setenv("VLAPERF_PROFILE_DIR", str(tmp_path / "mine"))
    assert prof.user_profile_dir() == tmp_path / "mine"
    base = prof.load_profile("pi05").to_dict()
    base["name"] = "my_pi05"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "my_pi05.json").write_text(json.dumps(base))
    assert prof.load_profile("my_pi05").name == "my_pi05"
    with pytest.raises(prof.ConfigError, match="yours in .*my_pi05"):
        prof.load_profile("nope")
    monkeypatch.delenv("VLAPERF_PROFILE_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert prof.user_profile_dir() == tmp_path / "xdg" / "vlaperf" / "profiles"
    assert not str(prof.user_profile_dir()).startswith(str(prof.BUNDLED_DIR))
