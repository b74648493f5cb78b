"""Busy-time accounting and the Chrome/Perfetto trace of a run (simulated or measured).

Stage names are the shared vocabulary of simulator and executor (docs/metrics.md):
``env_step``, ``env_reset``, ``inference``, ``train``, ``optimizer_step``, ``weight_sync``,
``phase_switch``. A span is (stage, resource, lane, start, end): the resource is what is busy
(``env_worker_3``, ``rollout_gpu_3``, ``actor``), the lane separates concurrent spans of it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STAGES = ("env_reset", "env_step", "inference", "train", "optimizer_step", "weight_sync", "phase_switch")
# Which resource class each stage occupies, for utilization.
STAGE_RESOURCE = {
    "env_reset": "env_cpu",
    "env_step": "env_cpu",
    "inference": "rollout_gpu",
    "train": "actor_gpu",
    "optimizer_step": "actor_gpu",
    "weight_sync": "link",
    "phase_switch": "gpu",
}


@dataclass
class Recorder:
    """Collects spans. ``keep_spans`` keeps every span for a trace; busy sums are always kept
    (per stage, weighted by how many units of its resource class a span occupies)."""

    keep_spans: bool = False
    spans: list[tuple[str, str, str, float, float, dict[str, Any]]] = field(default_factory=list)
    busy: dict[str, list[tuple[float, float, float]]] = field(default_factory=lambda: defaultdict(list))

    def span(self, stage: str, resource: str, lane: str, start: float, end: float,
             units: float = 1.0, **args: Any) -> None:
        self.busy[stage].append((start, end, units))
        if self.keep_spans:
            self.spans.append((stage, resource, lane, start, end, args))

    def busy_time(self, stage: str, t0: float, t1: float) -> float:
        """Unit-seconds of ``stage`` inside the window [t0, t1]."""
        total = 0.0
        for s, e, u in self.busy.get(stage, ()):
            lo, hi = max(s, t0), min(e, t1)
            if hi > lo:
                total += (hi - lo) * u
        return total

    def chrome_trace(self, meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """Chrome trace-event format ("X" complete events, microseconds): one process per
        resource, one thread per lane. Opens in Perfetto (ui.perfetto.dev) or chrome://tracing."""
        pids: dict[str, int] = {}
        tids: dict[tuple[str, str], int] = {}
        events: list[dict[str, Any]] = []
        for stage, resource, lane, start, end, args in sorted(self.spans, key=lambda s: (s[3], s[1])):
            pid = pids.setdefault(resource, len(pids) + 1)
            tid = tids.setdefault((resource, lane), len(tids) + 1)
            events.append({"name": stage, "cat": STAGE_RESOURCE.get(stage, "other"), "ph": "X",
                           "ts": start * 1e6, "dur": (end - start) * 1e6, "pid": pid, "tid": tid,
                           "args": args})
        for resource, pid in pids.items():
            events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": resource}})
        for (resource, lane), tid in tids.items():
            events.append({"name": "thread_name", "ph": "M", "pid": pids[resource], "tid": tid,
                           "args": {"name": lane}})
        return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": meta or {}}

    def write_trace(self, path: str | Path, meta: dict[str, Any] | None = None) -> None:
        from perfmodel.schema.jsonio import write_json_atomic

        write_json_atomic(path, self.chrome_trace(meta))
