"""How the executor's mechanics tests step their LIBERO scenes: the real scenes, without the
cameras and without the settle steps after a reset.

What those tests check (counts, weight versions, staleness, traces, faults, teardown) does not
depend on the images or on the settle steps, and the envs then cost about a third of the CPU
(measured 2026-12-05 on the 2-core machine, one tiny colocated run with soft resets: 61.5 CPU s
rendered with 15 settle steps, 33.7 with none, 18.0 with none and no rendering; a rendered 64 px
step is ~0.17 CPU s where an unrendered one is ~0.01, and a reset's 15 settle steps ~2.4 s).
Without cameras a scene is also compiled without its image textures (nothing reads them; the
physics is the same, tests/test_executor_envs.py): the compile takes half the CPU and an env's
construction 2.2 -> 1.2 CPU s (same machine and day). That holds here because the resets are soft;
with hard resets the first reset compiles the textures again and pays it back (0.5 -> 1.4 CPU s).
Rendering and the default settle steps are tested where they matter: tests/test_executor_envs.py
(the scene renders), tests/test_own_runs_e2e.py (runs a calibration reads) and
tests/test_executor_profile.py (what a profile measures)."""

from __future__ import annotations

# executor.runtime.modes.RunOptions fields
QUICK_ENVS = {"hard_reset": False, "settle_steps": 0, "render": False}
# the same as executor run flags
QUICK_ENV_FLAGS = ["--soft-reset", "--settle-steps", "0", "--no-render"]
