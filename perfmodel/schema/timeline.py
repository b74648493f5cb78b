"""Busy-time accounting and the Chrome/Perfetto trace of a run (simulated or measured).

Stage names are the shared vocabulary of simulator and executor (docs/metrics.md):
``env_step``, ``env_reset``, ``inference``, ``train``, ``optimizer_step``, ``weight_sync``,
``phase_switch``. A span is (stage, resource, lane, start, end, args): the resource is what is
busy (``env_worker_3``, ``rollout_gpu_3``, ``actor``), the lane separates concurrent spans of it.

Besides spans a recorder keeps (only when ``keep_spans``, i.e. for a trace):
- counters ``<what>/<resource>`` (``COUNTERS``): queue depth, weight version, staleness,
  samples waiting for the actor; Chrome "C" events in the resource's process;
- instant markers (``iteration <k> done``): Chrome "i" events of global scope;
- replicas: a simulated resource standing for ``n`` real ones is named
  ``"env_worker_0 (x8 replicas)"`` in the trace.

The trace layout (process and thread ids, their order) depends only on the resource and lane
names, never on event timing, so a simulated and a measured run of one plan get the same
processes and threads in the same order and open side by side in Perfetto.
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

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
# Counter tracks: name prefix -> the unit of its value (the Chrome "C" event's arg key, which
# Perfetto appends to the track name).
COUNTERS = {
    "queue_depth": "envs",          # envs whose inference request waits at a generator
    "weight_version": "version",    # policy version a generator holds / the actor published
    "staleness": "iterations",      # iteration being rolled out - behaviour policy version
    "samples_waiting": "samples",   # finished samples in the buffer, not yet taken by the actor
}
ITERATION_MARKER = "iteration {k} done"
# Process order in a trace: env workers, generators, the actor, colocated's shared GPUs.
RESOURCE_ORDER = ("env_worker", "rollout_gpu", "actor", "all_gpus")
LANE_ORDER = ("group", "inference", "weight_sync", "train", "phase_switch")


def resource_kind(name: str) -> tuple[str, int]:
    """("env_worker", 3) for "env_worker_3" (and for "env_worker_3 (x8 replicas)")."""
    base = str(name).split(" (", 1)[0]
    m = re.match(r"^(.*?)_(\d+)$", base)
    return (m.group(1), int(m.group(2))) if m else (base, -1)


def _order(name: str, order: tuple[str, ...]) -> tuple[int, str, int]:
    kind, idx = resource_kind(name)
    return (order.index(kind) if kind in order else len(order), kind, idx)


def replica_label(resource: str, replicas: int) -> str:
    return f"{resource} (x{replicas} replicas)" if replicas > 1 else resource


@dataclass
class Recorder:
    """Collects spans. ``keep_spans`` keeps every span, counter and marker for a trace; busy
    sums are always kept (per stage, weighted by how many units of its resource class a span
    occupies). Safe to call from several threads (the executor's driver). ``keep_busy=False``
    keeps nothing at all: a simulation asked only for its throughput, which reads the iterations'
    end times and no span (perfmodel.simulate.simulated_throughput); with ``keep_spans=True`` it
    is refused (ValueError), as no caller wants a trace without its busy sums."""

    keep_spans: bool = False
    keep_busy: bool = True
    spans: list[tuple[str, str, str, float, float, dict[str, Any]]] = field(default_factory=list)
    busy: dict[str, list[tuple[float, float, float]]] = field(default_factory=lambda: defaultdict(list))
    counters: list[tuple[str, float, float]] = field(default_factory=list)
    instants: list[tuple[str, float, dict[str, Any]]] = field(default_factory=list)
    replicas: dict[str, int] = field(default_factory=dict)
    _levels: dict[str, float] = field(default_factory=dict, repr=False, compare=False)
    _lock: Any = field(default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.keep_spans and not self.keep_busy:
            raise ValueError("Recorder: keep_spans=True with keep_busy=False would keep no span; "
                             "keep_busy=False keeps nothing (a throughput only)")

    def __getstate__(self) -> dict[str, Any]:  # a lock does not pickle
        state = dict(self.__dict__)
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def span(self, stage: str, resource: str, lane: str, start: float, end: float,
             units: float = 1.0, **args: Any) -> None:
        if not self.keep_busy:
            return
        self.busy[stage].append((start, end, units))
        if self.keep_spans:
            self.spans.append((stage, resource, lane, start, end, args))

    def spans_of(self, stage: str, resource: str, lane: str,
                 **args: Any) -> Callable[[tuple[float, float, float]], None]:
        """``span`` for many spans that share everything but their interval (a block's steps):
        a callable taking ``(start, end, units)``. Without a trace it is the busy list's own
        ``append``, so a hot loop pays one call per step and builds no trace arguments."""
        if not self.keep_busy:
            return _ignore
        append = self.busy[stage].append
        if not self.keep_spans:
            return append
        return lambda iv: self.span(stage, resource, lane, iv[0], iv[1], iv[2], **args)

    def counter(self, name: str, t: float, value: float) -> None:
        """Counter ``name`` (``<what>/<resource>``, ``what`` in COUNTERS) is ``value`` from ``t`` on."""
        if self.keep_spans:
            self.counters.append((name, t, float(value)))

    def count(self, name: str, t: float, delta: float) -> None:
        """Counter ``name`` changes by ``delta`` at ``t`` (a running level, e.g. a queue)."""
        if self.keep_spans:
            with self._lock:
                level = self._levels.get(name, 0.0) + delta
                self._levels[name] = level
                self.counters.append((name, t, level))

    def instant(self, name: str, t: float, **args: Any) -> None:
        """A marker at ``t`` across the whole trace (e.g. ``ITERATION_MARKER.format(k=1)``)."""
        if self.keep_spans:
            self.instants.append((name, t, args))

    def iteration_done(self, k: int, t: float, **args: Any) -> None:
        """Marker ``iteration <k> done`` (k counts from 1: the k-th training iteration ended)."""
        self.instant(ITERATION_MARKER.format(k=k), t, iteration=k, **args)

    def set_replicas(self, resource: str, replicas: int) -> None:
        """A simulated ``resource`` stands for ``replicas`` identical real ones."""
        if replicas > 1:
            self.replicas[resource] = int(replicas)

    def busy_time(self, stage: str, t0: float, t1: float) -> float:
        """Unit-seconds of ``stage`` inside the window [t0, t1]."""
        total = 0.0
        for s, e, u in self.busy.get(stage, ()):
            if e > t0 and s < t1:  # overlaps the window (what max/min below would clip to > 0)
                lo = s if s > t0 else t0
                hi = e if e < t1 else t1
                if hi > lo:
                    total += (hi - lo) * u
        return total

    def chrome_trace(self, meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """Chrome trace-event format (microseconds): one process per resource, one thread per
        lane ("X" complete events with their args), counter tracks ("C") in the resource's
        process, iteration markers ("i", global scope). Opens in Perfetto (ui.perfetto.dev)
        or chrome://tracing."""
        resources = {s[1] for s in self.spans} | {c[0].split("/", 1)[1] for c in self.counters if "/" in c[0]}
        if self.instants:
            resources.add("actor")
        order = sorted(resources, key=lambda r: _order(r, RESOURCE_ORDER))
        pids = {r: i + 1 for i, r in enumerate(order)}
        lanes = sorted({(s[1], s[2]) for s in self.spans},
                       key=lambda rl: (pids[rl[0]], _order(rl[1], LANE_ORDER)))
        tids = {rl: i + 1 for i, rl in enumerate(lanes)}
        events: list[dict[str, Any]] = []
        for r, pid in pids.items():
            events.append({"name": "process_name", "ph": "M", "pid": pid,
                           "args": {"name": replica_label(r, self.replicas.get(r, 1))}})
            events.append({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}})
        for (r, lane), tid in tids.items():
            events.append({"name": "thread_name", "ph": "M", "pid": pids[r], "tid": tid, "args": {"name": lane}})
            events.append({"name": "thread_sort_index", "ph": "M", "pid": pids[r], "tid": tid,
                           "args": {"sort_index": tid}})
        for stage, resource, lane, start, end, args in sorted(self.spans, key=lambda s: (s[3], pids[s[1]])):
            events.append({"name": stage, "cat": STAGE_RESOURCE.get(stage, "other"), "ph": "X",
                           "ts": start * 1e6, "dur": (end - start) * 1e6, "pid": pids[resource],
                           "tid": tids[(resource, lane)], "args": dict(args)})
        for name, t, value in _compact(self.counters):
            what, _, resource = name.partition("/")
            events.append({"name": name, "cat": "counter", "ph": "C", "ts": t * 1e6,
                           "pid": pids.get(resource, 0), "args": {COUNTERS.get(what, "value"): value}})
        for name, t, args in sorted(self.instants, key=lambda i: i[1]):
            events.append({"name": name, "cat": "marker", "ph": "i", "s": "g", "ts": t * 1e6,
                           "pid": pids["actor"], "tid": 0, "args": dict(args)})
        other = dict(meta or {})
        if self.replicas:
            other["simulated_replicas"] = dict(sorted(self.replicas.items(), key=lambda kv: _order(kv[0], RESOURCE_ORDER)))
        return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}

    def write_trace(self, path: str | Path, meta: dict[str, Any] | None = None) -> None:
        from perfmodel.schema.jsonio import write_json_atomic

        write_json_atomic(path, self.chrome_trace(meta))


def _ignore(_span: tuple[float, float, float]) -> None:
    """``spans_of`` of a recorder that keeps nothing."""


def _compact(counters: list[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
    """Counter samples in time order, keeping per counter the last value at each instant and
    only changes (a queue that fills and drains at one instant is one sample)."""
    last_at: dict[tuple[str, float], float] = {}
    for name, t, v in sorted(counters, key=lambda c: c[1]):  # stable: insertion order at equal t
        last_at[(name, t)] = v
    out, prev = [], {}
    for (name, t), v in last_at.items():
        if prev.get(name) != v:
            out.append((name, t, v))
            prev[name] = v
    return out


def trace_layout(trace: dict[str, Any]) -> dict[str, Any]:
    """What Perfetto lays out, independent of timing and of replica naming: processes in
    order (resource names), each with its threads in order (lane names) and counter tracks."""
    procs: dict[int, str] = {}
    sort: dict[int, int] = {}
    threads: dict[int, list[tuple[int, str]]] = defaultdict(list)
    counters: dict[int, set[str]] = defaultdict(set)
    for e in trace.get("traceEvents", []):
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e["pid"]] = str(e["args"]["name"]).split(" (", 1)[0]
        elif e.get("ph") == "M" and e.get("name") == "process_sort_index":
            sort[e["pid"]] = e["args"]["sort_index"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[e["pid"]].append((e["tid"], e["args"]["name"]))
        elif e.get("ph") == "C":
            counters[e["pid"]].add(e["name"].split("/", 1)[0])
    out = []
    for pid in sorted(procs, key=lambda p: (sort.get(p, p), p)):
        out.append({"process": procs[pid], "threads": [n for _, n in sorted(threads[pid])],
                    "counters": sorted(counters[pid])})
    return {"processes": out}
