"""vlaperf's planner: profiles, the simulator, calibration and the commands (perfmodel.cli)."""

import os as _os
import signal as _signal
import sys as _sys

# The console scripts (pyproject.toml [project.scripts]) import this package first: a Ctrl-C while
# they still import (the first ~0.5 s) ends the process with 130 and no traceback, as Unix tools
# do; perfmodel.cliutil.run_click then puts Python's own handler back ("error: aborted").
ENTRY_POINTS = ("perfmodel", "executor", "analysis")


def early_interrupt(signum, frame):  # noqa: ARG001
    _os._exit(130)


if _os.path.basename(_sys.argv[0] if _sys.argv else "") in ENTRY_POINTS:
    try:
        _signal.signal(_signal.SIGINT, early_interrupt)
    except ValueError:  # not the main thread
        pass
