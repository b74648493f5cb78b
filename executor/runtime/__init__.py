"""``executor run``: run a plan for real on Ray, in the simulator's terms.

The walk from ``executor run`` (``executor/cli.py``: parse, check, call, print) to record.json:
- ``preflight``: every check before work starts (options, suite, Ray address, memory, slots).
- ``rundir``: the run directory, reserved and checked up front, written atomically, never over
  what a user had; stale temporary directories of killed runs removed.
- ``session``: Ray start/join/stop (its session directory removed), the run's threads, signals,
  the dead-actor watch; returns what happened whatever happened (``RunResult``).
- ``modes``: each mode as one declarative wiring of the driver mechanisms and Ray actors.
- ``driver``: the driver-side mechanisms shared by every mode, mirroring ``perfmodel.sim.workers``.
- ``actors``: the Ray actors, one class per worker kind (env worker, generator, trainer rank).
- ``record``: the run record (``perfmodel.prediction.predict``'s fields, measured, and the
  executor's own: counts, faults and where they fell, host facts).
"""
