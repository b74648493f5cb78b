"""Fast-forward of a rollout recording (``workers.record_rollout``) through its periodic part.

A recorded worker (dynamic batching, several env groups, deterministic durations) is a closed
system: its groups, its inference server and its cores interact with nothing else. Staggered
groups settle within an epoch, after a few chunk steps, into a pattern that repeats: the state at
one chunk step of group 0 (every group's phase and how long it has been in it, how far each group
is ahead of group 0, the server's queue, batch and batching timer, the cores held and who waits
for them) equals the state some chunk steps earlier, shifted in time. From equal states a
deterministic simulation does the same thing again, so the ``m`` periods that follow are the
last period's spans shifted by 1..m periods, as long as no group reaches the end of its epoch
within them. ``PeriodWatch.checkpoint`` (called by group 0 at each chunk step) detects the
repeat, copies the period ``m`` times into the output, moves every group's chunk counter on by
``m`` periods and lets the simulation go on from the same state: its later spans are shifted by
the ``m`` periods skipped. The result is the unaccelerated recording up to float rounding (times
are ``start + k x period`` instead of running sums; tests/test_simulator.py compares the two over
many cost combinations). An epoch costs the transient, a period and the epoch's tail, instead
of every chunk step.

States are compared with their durations rounded to ``DIGITS`` decimals of a second: equal
states differ by float rounding (~1e-13 s), different ones by a difference of durations.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Hashable

DIGITS = 9  # decimals of a second in a state's durations (float rounding is ~1e-13 s)
# when a state was seen: (unaccelerated time, group 0's epoch, its chunk step, output lengths per stage, epoch ends)
_Seen = tuple[float, int, int, dict[str, int], int]


class PeriodWatch:
    """Watches one recorded ``EnvWorker`` (its counters ``epochs_done``/``chunks_done``, and the
    ``phase`` its groups mark) and its inference server; owns the recording's output (spans in
    the order they ended, epoch ends), in unaccelerated time."""

    def __init__(self, worker: Any) -> None:
        self.worker, self.env, self.rec = worker, worker.env, worker.rec
        self.phase: list[tuple[str, float]] = [("start", 0.0)] * worker.groups  # what each group waits for, since when
        self.owner: dict[int, int] = {}  # id of a request's done event or a cores get -> its group
        self.spans: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
        self.epoch_ends: list[float] = []
        self.offset = 0.0  # unaccelerated time minus simulated time (the periods skipped)
        self.periods_skipped = 0
        # state -> when it was seen: within group 0's epoch, and at its epochs' starts
        self._in_epoch: dict[Hashable, _Seen] = {}
        self._in_epoch_of = -1
        self._epoch_starts: dict[Hashable, _Seen] = {}

    def mark(self, g: int, what: str, token: Any = None) -> None:
        """Group ``g`` now waits for ``what`` (``token``: the event, when others hold it in a queue)."""
        self.phase[g] = (what, self.env.now)
        if token is not None:
            self.owner[id(token)] = g

    def flush(self) -> None:
        """Move what the simulation recorded so far into the output, in unaccelerated time."""
        off = self.offset
        for stage, got in self.rec.busy.items():
            if got:
                self.spans[stage].extend(got if off == 0.0 else [(s + off, e + off, u) for s, e, u in got])
                got.clear()
        ends = self.worker.epoch_end_times
        if ends:
            self.epoch_ends.extend(t + off for t in ends)
            ends.clear()

    def _state(self) -> Hashable:
        w, server, now = self.worker, self.worker.server, self.env.now
        done, epochs = w.chunks_done, w.epochs_done
        e0, c0 = epochs[0], done[0]
        groups = tuple((epochs[g] - e0, done[g] - c0, what, round(now - since, DIGITS))
                       for g, (what, since) in enumerate(self.phase) if g)
        owner = self.owner
        firing = None
        if server.firing is not None:
            start, batch = server.firing
            firing = (round(now - start, DIGITS), tuple(owner[id(r.done)] for r in batch))
        gathering = None if server.gathering_since is None else round(now - server.gathering_since, DIGITS)
        queue = tuple(owner[id(r.done)] for r in server.queue)
        cores = (w.cores.level, tuple(owner[id(ev)] for ev in w.cores.get_queue), len(w.cores.put_queue))
        return groups, firing, gathering, queue, cores

    def checkpoint(self) -> None:
        """Group 0 starts a chunk step: skip ahead if the state repeats one seen earlier in its
        epoch (every group moves on by the chunk steps between), or one seen at the start of an
        earlier epoch (every group moves on by the epochs between)."""
        self.flush()
        w = self.worker
        e0, c0 = w.epochs_done[0], w.chunks_done[0]
        if e0 != self._in_epoch_of:
            self._in_epoch.clear()
            self._in_epoch_of = e0
        state = self._state()
        here = (self.env.now + self.offset, e0, c0, {s: len(v) for s, v in self.spans.items()}, len(self.epoch_ends))
        workload = w.costs.plan.workload
        # an epoch's first chunk step: periods of whole epochs
        if c0 == 0 and self._repeat(self._epoch_starts, state, here, 1, w.epochs_done, workload.rollout_epoch):
            return
        # every group stays inside its epoch's chunk loop through the copies
        self._repeat(self._in_epoch, state, here, 2, w.chunks_done, workload.chunk_steps_per_epoch)

    def _repeat(self, table: dict[Hashable, _Seen], state: Hashable, here: _Seen, at: int, counters: list[int],
                limit: int) -> bool:
        """If ``state`` is in ``table`` (it is recorded there as seen ``here`` either way), skip as
        many of the periods since then as keep every group's ``counters`` (chunk steps or epochs
        done; ``here[at]`` is group 0's) below ``limit``, and move the counters on. True if it did."""
        seen = table.get(state)
        table[state] = here
        if seen is None:
            return False
        steps = here[at] - seen[at]
        m = min((limit - 1 - d) // steps for d in counters)
        if not self._skip(seen, m):
            return False
        for g in range(len(counters)):
            counters[g] += m * steps
        return True

    def _skip(self, seen: _Seen, m: int) -> bool:
        """Copy the output since ``seen`` ``m`` times, each a period later; the simulation goes on
        ``m`` periods later than it is. False if there is nothing to skip."""
        then, _, _, at, ends_at = seen
        period = self.env.now + self.offset - then
        if m < 1 or period <= 0:
            return False
        shifts = [k * period for k in range(1, m + 1)]
        for stage, got in self.spans.items():
            one = got[at.get(stage, 0):]
            got.extend([(s + shift, e + shift, u) for shift in shifts for s, e, u in one])
        one_ends = self.epoch_ends[ends_at:]
        self.epoch_ends.extend([t + shift for shift in shifts for t in one_ends])
        self.offset += m * period
        self.periods_skipped += m
        self._in_epoch.clear()
        return True
