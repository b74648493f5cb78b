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

Ties. Two timeouts due at the same instant (within ``TIE_S``) go in the order of their float
times, or of their scheduling when the floats are equal: float rounding decides it, and the
order can matter (which group's request joins the queue first). Structural ties are common
(a reset as long as two inferences and two chunk steps; groups staggered by exact fractions of
a chunk step). The fast-forward's times are the reference's up to rounding, not bit for bit, so
at a tie it may go the other way. The recording therefore runs on a ``TieWatch`` clock, which
notes every tie, and the fast-forward stays exact by two rules:
- until the first skip the recording is the reference bit for bit; a tie after a skip aborts
  the recording (``TieAfterSkip``), and ``workers.record_rollout`` records again, skipping only
  after that tie (``skip_after``), and once more without skipping if that one meets a tie after
  a skip too (``workers.RECORDINGS_AT_TIES``). This rule alone keeps
  the recording exact, but a tie in a copied period recurs after the skip, so:
- no period with a tie in it is copied (the reference's later periods may break it otherwise),
  which spares those recordings.
The published plans have no ties (their recordings skip as much as before; the check costs
~0.15 ms of pi05's 1.7 ms recording at 32 GPUs, best of 150, measured); tests/test_simulator.py's
generated costs have many (one run of 600 examples: 73 recorded again, 179 refused a period).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Callable, Hashable

import simpy
from simpy.events import Timeout

DIGITS = 9  # decimals of a second in a state's durations (float rounding is ~1e-13 s)
TIE_S = 1e-9  # timeouts due closer than this are a tie (float rounding is ~1e-13 s; see module doc)
# when a state was seen: (unaccelerated time, group 0's epoch, its chunk step, output lengths per stage, epoch ends)
_Seen = tuple[float, int, int, dict[str, int], int]


class TieAfterSkip(Exception):
    """A tie after a skip: the recording may differ from the reference there (see module doc)."""

    def __init__(self, when: float) -> None:
        super().__init__(when)
        self.when = when  # unaccelerated time of the tie


class TieWatch(simpy.Environment):
    """A SimPy environment that calls ``on_tie(t)`` when the timeout it is about to process (due
    at t) is due within ``TIE_S`` of the one before. Timeouts are processed in time order, so
    every pair of timeouts within ``TIE_S`` of each other has such a consecutive pair."""

    def __init__(self) -> None:
        super().__init__()
        self.on_tie: Callable[[float], None] | None = None
        self._last = -math.inf  # due time of the last timeout processed

    _step = simpy.Environment.step

    def step(self) -> None:
        queue = self._queue
        if queue:
            when, _, _, event = queue[0]
            if type(event) is Timeout and event._delay > 0:  # zero delays: causal, same order in both
                if when - self._last <= TIE_S and self.on_tie is not None:
                    self.on_tie(when)
                self._last = when
        self._step()


class PeriodWatch:
    """Watches one recorded ``EnvWorker`` (its counters ``epochs_done``/``chunks_done``, and the
    ``phase`` its groups mark) and its inference server; owns the recording's output (spans in
    the order they ended, epoch ends), in unaccelerated time."""

    def __init__(self, worker: Any, skip_after: float = -math.inf) -> None:
        self.worker, self.env, self.rec = worker, worker.env, worker.rec
        if not isinstance(self.env, TieWatch):
            raise TypeError("a PeriodWatch needs its worker on a TieWatch environment")
        self.env.on_tie = self._tie
        self.skip_after = skip_after  # no skip until after this unaccelerated time (a tie there)
        self.last_tie = -math.inf  # unaccelerated time of the latest tie
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

    def _tie(self, when: float) -> None:
        self.last_tie = when + self.offset
        if self.periods_skipped:
            raise TieAfterSkip(self.last_tie)

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
        ``m`` periods later than it is. False if there is nothing to skip, or the period cannot be
        copied exactly (a tie in it, or not yet past ``skip_after``)."""
        then, _, _, at, ends_at = seen
        now = self.env.now + self.offset
        period = now - then
        # a tie in the period, or before the tie a recording found after a skip: see module doc
        if m < 1 or period <= 0 or self.last_tie >= then - TIE_S or now <= self.skip_after:
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
