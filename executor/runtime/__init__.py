"""``executor run``: run a plan for real on Ray, in the simulator's terms.

- ``actors``: the Ray actors, one class per worker kind (env worker, generator, trainer rank).
- ``driver``: the driver-side mechanisms shared by every mode (weight store, sample buffer,
  dynamic batcher, rollout worker loop, actor loop), mirroring ``perfmodel.sim.workers``.
- ``modes``: each mode as one declarative wiring of those, like ``perfmodel.sim.modes``.
- ``record``: the run record (``perfmodel.simulate.predict``'s fields) and trace.
"""
