"""One ``executor run`` on Ray: start or join Ray, wire the mode, run its threads, watch the
actors, stop on a signal, tear down, and hand back what was measured (``RunResult``) whatever
happened, so a partial record is always written.

- Ray: a local Ray is started with this run's own session directory, removed at the end; a
  cluster (``--address`` or ``RAY_ADDRESS``, checked in ``preflight.resolve_address``) is joined
  and left running. Ray's banners go to ``ray_init.log`` in the run directory unless verbose.
- Signals: the first Ctrl-C or a SIGTERM stops the run (partial record) within a bounded time
  (``STOP_BUDGET_S`` from the first signal). A local Ray's processes block SIGTERM and SIGINT
  (``RaySession.start``), so a signal to the whole process group stops the driver alone. A
  start-up that does not return at once (``ray.init`` too: it runs in a thread of its own) is
  abandoned, and a teardown that cannot finish (a joined cluster's GCS may be gone, and Ray calls
  then block for a minute) gives way to killing this run's local Ray processes; the run is then
  marked ``abandoned`` and the CLI leaves with ``os._exit`` after writing the record, as Ray
  cannot be shut down under a thread stuck in it.
  Later signals are only counted, so the record is still written.
- Dead actors: ``ActorWatch`` polls the GCS actor table and ends the run the moment an actor of
  this run is DEAD, naming it (env worker, generator or trainer rank) and its node.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from perfmodel.cliutil import shows_progress
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.plan import Plan
from perfmodel.schema.timeline import Recorder

WATCH_PERIOD_S = 0.5  # GCS actor-table poll period: a dead actor ends the run within this
# From the first signal to a torn-down run, whatever Ray's state: a scheduler or `timeout` that
# sends SIGTERM usually sends SIGKILL some seconds later (10 s for `timeout -k 10`, Slurm's
# KillWait 30 s), and the record must be on disk before then. The record itself takes well under
# a second more.
STOP_BUDGET_S = 6.0
STARTUP_GRACE_S = 1.5  # a start-up stopped by a signal may finish this long (actors almost up)


class ActorLost(Exception):
    """An actor of this run died (its process, or its node)."""

    def __init__(self, label: str, node: str, cause: str) -> None:
        super().__init__(f"{label} on node {node} died: {cause}")
        self.label, self.node, self.cause = label, node, cause


# ---------------------------------------------------------------------------------------------
# Signals


class Signals:
    """SIGINT / SIGTERM as a stop flag instead of an exception in the middle of teardown."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop, self.count, self.reason = stop, 0, None
        self.phase = "startup"  # startup | running | teardown
        self.first_at: float | None = None  # time.monotonic() of the first signal
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: Any) -> None:
        self.count += 1
        if self.reason is None:
            self.reason = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
            self.first_at = time.monotonic()
        self.stop.set()

    def deadline(self) -> float | None:
        """When teardown must be over (time.monotonic()), if a signal stopped the run."""
        return None if self.first_at is None else self.first_at + STOP_BUDGET_S

    def install(self) -> None:
        """(Re)install the handlers: ``ray.init`` sets its own SIGTERM handler (sys.exit)."""
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                old = signal.signal(s, self._handle)
                self._old.setdefault(s, old)

    def ignore_from_now(self) -> None:
        """Ignore Ctrl-C and SIGTERM from now on, and leave them ignored on exit: for a command
        leaving after a signal stopped its run and its record is written. Python's exit sets its
        own handlers back to the default (the signal kills the process) but leaves an ignored one
        ignored, so an impatient second Ctrl-C during the exit neither kills the process (exit
        status -2, not 130) nor prints a traceback. A caller running the command in a process
        that goes on restores them (tests/inproc.py)."""
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                signal.signal(s, signal.SIG_IGN)
                self._old[s] = signal.SIG_IGN

    def __enter__(self) -> "Signals":
        self.install()
        return self

    def __exit__(self, *exc: Any) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)


# ---------------------------------------------------------------------------------------------
# Ray


@contextlib.contextmanager
def quiet_output(log: Path | None) -> Iterator[Any]:
    """Send the libraries' output to ``log`` for the duration: fds 1 and 2 (Ray's banners and
    worker-death warnings, from Python and C++; LIBERO's ``[info] ...`` lines and robosuite's
    macro warnings, printed by env processes started meanwhile, which inherit them) and Python's
    ``sys.stdout`` / ``sys.stderr`` (Ray's driver prints the cluster's error messages, e.g. a node
    marked dead followed by its raylet's last 20 log lines, to ``sys.stdout`` from a background
    thread whatever ``log_to_driver`` says: a dead node would otherwise bury the one error line,
    and corrupt ``--json``). Yields a file on the real stderr for the progress bar."""
    if log is None:
        yield sys.stderr
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    real = os.fdopen(os.dup(saved[2]), "w", buffering=1)
    py = open(log, "a", buffering=1)
    streams = sys.stdout, sys.stderr
    try:
        with open(log, "ab") as fh:
            for fd in saved:
                os.dup2(fh.fileno(), fd)
        sys.stdout = sys.stderr = py
        yield real
    finally:
        sys.stdout, sys.stderr = streams
        with contextlib.suppress(Exception):
            py.flush()
        # ``py`` is not closed here: Ray's listener thread may be writing to it right now; it
        # closes when the last reference goes
        del py
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        for fd, dup in saved.items():
            os.dup2(dup, fd)
            os.close(dup)
        real.close()


@dataclass
class RaySession:
    """Ray for one run: joined (``address``) or started locally with ``num_cpus`` slots."""

    address: str | None
    num_cpus: int
    started: bool = False
    session_dir: str | None = None
    # ray.init's thread: it stays until the session ends (``stop``, ``kill``: ``_release``)
    _init_thread: threading.Thread | None = field(default=None, repr=False)
    _release: threading.Event = field(default_factory=threading.Event, repr=False)
    # this process's children before ray.init, and when it began: an abandoned start's processes
    # and session directory are those made since
    _children_before: set[int] = field(default_factory=set, repr=False)
    _init_began: float = 0.0

    def start(self, interrupted: Callable[[], bool] = lambda: False) -> None:
        """Start or join Ray. ``ray.init`` runs in a thread of its own (``_init``) while the
        caller's thread waits for it, so that a signal is seen at once: when ``interrupted()``
        turns true before ray.init returns, the start is abandoned (StartupAbandoned) and ``kill``
        ends what it had started. (ray.init in the main thread, with SIGTERM blocked there for its
        processes to inherit the block, left a group SIGTERM pending until ray.init returned:
        12.1-16.1 s after the signal at load 11-13 on 2 cores, 2026-12-06.)"""
        os.environ.setdefault("RAY_worker_niceness", "0")  # as the profile measured (Ray's default: 15)
        # Ray's C++ failure-signal handler turns SIGTERM into an abort with a stack dump (no
        # record); the driver's own handler (Signals) must see SIGTERM instead. Ray reads this
        # when it is imported, so it is set first.
        os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
        import ray
        if ray.is_initialized():  # a caller's session (tests): use it, leave it running
            return
        if interrupted():  # a signal came before Ray started: start nothing
            raise StartupAbandoned()
        box: dict[str, Any] = {}
        self._children_before = set(_children(os.getpid()))
        self._init_began = time.time()
        self._release.clear()
        self._init_thread = threading.Thread(target=self._init, args=(box,), daemon=True, name="ray-init")
        self._init_thread.start()
        while "done" not in box:
            if interrupted():
                raise StartupAbandoned()
            self._init_thread.join(0.05)
            if not self._init_thread.is_alive() and "done" not in box:  # _init always says; a bound
                box.update(error=RuntimeError("ray.init's thread ended without a result"), done=True)
        if "error" in box:
            e = box["error"]
            raise ConfigError("address" if self.address else "ray",
                              f"Ray did not start{' at ' + self.address if self.address else ''}: "
                              f"{type(e).__name__}: {_first_line(e)}") from None
        self.started = True
        if not self.address:
            try:
                self.session_dir = ray._private.worker.global_worker.node.get_session_dir_path()
            except Exception:  # noqa: BLE001 - only used for cleanup
                self.session_dir = None

    def _init(self, box: dict[str, Any]) -> None:
        """``ray.init``, in the thread that then stays until the session ends: Ray's head processes
        die with the *thread* that started them (PR_SET_PDEATHSIG). They start with SIGTERM
        blocked, as Ray starts them with SIGINT blocked: this thread blocks it, and they inherit
        its mask (so do the raylet's workers and their env processes); the driver's other threads
        do not block it, so the driver sees a SIGTERM at once. A SIGTERM to the process group
        (Slurm, `timeout`) then stops this driver alone, which writes the record and ends them.
        Else the raylet died with the group, and at the driver's next call to it Ray's core worker
        ended this process at once (exit 1, no record: 2 of 15 runs of the group-SIGTERM test,
        2026-12-05). Out of the main thread, ray.init leaves the driver's SIGTERM handler alone."""
        import ray

        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        worker_log = logging.getLogger("ray._private.worker")
        if not any(isinstance(f, _OurSigtermHandler) for f in worker_log.filters):
            worker_log.addFilter(_OurSigtermHandler())
        kw: dict[str, Any] = dict(log_to_driver=False, configure_logging=False, logging_level=logging.ERROR)
        # fd 2 is already redirected by the caller (quiet_output) unless --verbose
        env = None
        try:
            if self.address:
                ray.init(address=self.address, **kw)
            else:
                # RAY_ADDRESS would make ray.init join a cluster (and refuse num_cpus);
                # preflight.resolve_address already turned it into ``address`` if set.
                env = os.environ.pop("RAY_ADDRESS", None)
                ray.init(address="local", num_cpus=self.num_cpus, include_dashboard=False, **kw)
        except BaseException as e:  # noqa: BLE001 - whatever Ray raises, the caller says it in one line
            box["error"] = e
        finally:
            if env is not None:
                os.environ["RAY_ADDRESS"] = env
            box["done"] = True
        if "error" not in box:
            self._release.wait()

    def kill(self, node: Any = None) -> None:
        """End this run's local Ray at once, without ``ray.shutdown`` (which blocks on a dead GCS,
        and aborts the process under a thread stuck in a Ray call): SIGKILL the head's processes
        (GCS, raylet and the rest; the raylet's workers, and their env processes, end when it
        does) and remove the session directory. A joined cluster is left running. ``node``: the
        head's processes when ``stop`` has already detached them from Ray. A start that was
        abandoned (``start``: StartupAbandoned) is ended too (``_kill_start``)."""
        if not self.started:
            self._kill_start()
            return
        if self.address:
            self._release.set()
            return
        import ray

        node = node or getattr(ray._private.worker, "_global_node", None)
        # Every process of this run's Ray, listed before any is killed (a killed raylet's
        # children are re-parented to init): the head's processes and their descendants (the
        # raylet's agents, workers and the workers' env processes, whose command lines Ray
        # rewrites and which do not name the session), and whatever names the session. The
        # agents block SIGTERM and SIGINT (they inherit the start-up mask) and outlive a dead
        # raylet for minutes, so each is SIGKILLed, not left to end on its own.
        roots = [info.process.pid for infos in getattr(node, "all_processes", {}).values() for info in infos
                 if getattr(info, "process", None) is not None]
        pids = set(process_tree(roots)) | set(session_pids(self.session_dir) if self.session_dir else [])
        if node is not None:
            with contextlib.suppress(Exception):
                node.kill_all_processes(check_alive=False, allow_graceful=False, wait=False)
        self.started = False
        if self.session_dir:  # started since the listing (a worker the raylet was starting)
            pids |= set(session_pids(self.session_dir))
        pids.discard(os.getpid())
        kill_all(pids)
        if self.session_dir:
            remove_session_dir(self.session_dir)
        self._release.set()

    def _kill_start(self) -> None:
        """End what an abandoned ``start`` made, while ray.init still runs in its thread (Ray's
        node is not known yet): this process's children since ray.init began, with all their
        descendants, and whatever names or holds open a session directory made meanwhile (Ray
        names it after this process). ray.init is first told to stop (SystemExit raised in its
        thread when it next runs Python), so that it starts no more; the listing is made twice,
        0.2 s apart, for one it started meanwhile. Any it starts later ends with its thread, or
        with this process, which leaves once the record is written (``abandoned``): their parent
        is ray.init's thread (PR_SET_PDEATHSIG)."""
        if self._init_thread is None or self.address:
            return
        _raise_in(self._init_thread, SystemExit)
        self._release.set()  # (if ray.init had just returned: its thread waits there)
        sessions: set[str] = set()
        for again in (True, False):
            sessions |= set(_sessions_since(self._init_began))
            pids = set(process_tree(sorted(set(_children(os.getpid())) - self._children_before)))
            for d in sessions:
                pids |= set(session_pids(d))
            pids.discard(os.getpid())
            kill_all(pids)
            for d in sessions:
                remove_session_dir(d)
            if again:
                self._init_thread.join(0.2)
        self._init_thread.join(KILL_WAIT_S)  # ray.init leaving (its files, once more, below)
        for d in sessions | set(_sessions_since(self._init_began)):
            remove_session_dir(d)

    def stop(self) -> None:
        """Shut Ray down if this run started it, and remove its session directory. The driver
        disconnects (``ray.shutdown``), then its local Ray is killed (``kill``): Ray's own
        shutdown sends SIGTERM first and waits a second a process for it, and this run's Ray
        processes block SIGTERM (``start``)."""
        import ray

        if not self.started:
            return
        if self.address:
            ray.shutdown()
            self.started = False
            self._release.set()
            return
        worker = ray._private.worker
        node, worker._global_node = getattr(worker, "_global_node", None), None  # shutdown: disconnect only
        try:
            ray.shutdown()
        finally:
            self.kill(node)


class _OurSigtermHandler(logging.Filter):
    """Drops Ray's warning that ray.init, out of the main thread, sets no SIGTERM handler: the
    driver's own (Signals) is the one wanted."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


KILL_WAIT_S = 1.0  # SIGKILLed processes are gone in milliseconds; a bound, not a wait


def kill_all(pids: set[int] | list[int]) -> None:
    """SIGKILL ``pids`` and wait (at most KILL_WAIT_S) until they are gone."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    left, end = list(pids), time.monotonic() + KILL_WAIT_S
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = [p for p in left if Path(f"/proc/{p}").exists() and not _zombie(p)]


def process_tree(roots: list[int]) -> list[int]:
    """``roots`` and all their descendants that are alive now (parent pids read from /proc)."""
    children: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            ppid = _ppid(int(p.name))
            if ppid is not None:
                children.setdefault(ppid, []).append(int(p.name))
    out: list[int] = []
    todo = [r for r in roots if Path(f"/proc/{r}").exists()]
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.append(pid)
            todo += children.get(pid, [])
    return out


def _raise_in(thread: threading.Thread, exc: type[BaseException]) -> None:
    """Raise ``exc`` in ``thread`` when it next runs Python code (CPython's asynchronous
    exception; a thread inside a C call sees it when the call returns)."""
    import ctypes

    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(exc))


def _children(pid: int) -> list[int]:
    """The live children of ``pid`` (parent pids read from /proc)."""
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(int(p.name)) == pid]


def _sessions_since(began: float) -> list[str]:
    """This process's Ray session directories (Ray names them ``session_<date>_<pid>``) changed
    since ``began`` (time.time())."""
    try:
        from ray._common.utils import get_default_ray_temp_dir

        temp = Path(get_default_ray_temp_dir())
    except Exception:  # noqa: BLE001 - a Ray without it: its default place
        temp = Path("/tmp/ray")
    out = []
    for d in temp.glob(f"session_*_{os.getpid()}"):
        with contextlib.suppress(OSError):
            if not d.is_symlink() and d.stat().st_mtime >= began - 1.0:
                out.append(str(d))
    return out


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def session_pids(session_dir: str) -> list[int]:
    """Pids of this machine's processes whose command line names the Ray session (Ray's own
    processes and its workers; forked env processes inherit their worker's command line), or that
    hold a file of it open (Ray's agents, whose command lines Ray rewrites, keep their logs there:
    after a kill -9 of the driver they are found so, re-parented to init)."""
    name = Path(session_dir).name.encode()
    prefix = str(Path(session_dir)) + os.sep
    me, pids = os.getpid(), []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != me:
            with contextlib.suppress(OSError):
                if name in (p / "cmdline").read_bytes() or _holds_open(p, prefix):
                    pids.append(int(p.name))
    return pids


def _holds_open(proc: Path, prefix: str) -> bool:
    with contextlib.suppress(OSError):
        for fd in (proc / "fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd).startswith(prefix):
                    return True
    return False


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def remove_session_dir(session_dir: str) -> None:
    p = Path(session_dir)
    if not p.name.startswith("session_"):
        return
    shutil.rmtree(p, ignore_errors=True)
    latest = p.parent / "session_latest"
    with contextlib.suppress(OSError):
        if latest.is_symlink() and Path(os.readlink(latest)).name == p.name:
            latest.unlink()


def _first_line(e: BaseException) -> str:
    text = [x.strip() for x in str(e).strip().splitlines() if x.strip()]
    return (text[0] if text else "")[:300]


# ---------------------------------------------------------------------------------------------
# Dead actors


class ActorWatch:
    """Polls the GCS actor table for this run's actors; the first DEAD one is reported."""

    def __init__(self, handles: dict[str, list[Any]], on_dead: Callable[[ActorLost], None]) -> None:
        kinds = {"env_workers": "env_worker", "generators": "generator", "trainers": "trainer_rank"}
        self.labels: dict[str, str] = {}
        for kind, hs in handles.items():
            for i, h in enumerate(hs):
                self.labels[h._actor_id.hex()] = f"{kinds.get(kind, kind)}_{i}"
        self.on_dead = on_dead
        self.lost: ActorLost | None = None
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="actor-watch")

    def start(self) -> "ActorWatch":
        self._thread.start()
        return self

    def halt(self, timeout: float | None = 5.0) -> None:
        self._halt.set()
        self._thread.join(5.0 if timeout is None else timeout)

    def nodes(self) -> dict[str, str]:
        """Where each actor of the run lives: label -> node (IP and node id)."""
        from ray._private import state

        out = {}
        for actor_id, label in self.labels.items():
            try:
                out[label] = _node_name(state.actors(actor_id=actor_id))
            except Exception:  # noqa: BLE001
                out[label] = "?"
        return out

    def poll(self) -> ActorLost | None:
        from ray._private import state

        for actor_id, label in self.labels.items():
            try:
                info = state.actors(actor_id=actor_id)
            except Exception:  # noqa: BLE001 - the GCS itself is gone: the driver's calls fail too
                continue
            if info and info.get("State") == "DEAD":
                return ActorLost(label, _node_name(info), _death_cause(info))
        return None

    def _run(self) -> None:
        while not self._halt.wait(WATCH_PERIOD_S):
            lost = self.poll()
            if lost is not None:
                self.lost = lost
                self.on_dead(lost)
                return

    def describe(self, e: BaseException) -> str | None:
        """Name the actor of a Ray actor error raised in a driver thread, if it is ours."""
        actor_id = getattr(e, "actor_id", None)
        label = self.labels.get(actor_id) if actor_id else None
        if label is None:
            return None
        try:
            from ray._private import state

            info = state.actors(actor_id=actor_id)
        except Exception:  # noqa: BLE001
            info = {}
        return str(ActorLost(label, _node_name(info) if info else "?", _first_line(e)))


def _node_name(info: dict[str, Any]) -> str:
    addr = info.get("Address") or {}
    node = str(addr.get("NodeID") or "")
    return f"{addr.get('IPAddress') or '?'} (node id {node[:12] or '?'})"


def _death_cause(info: dict[str, Any]) -> str:
    cause = info.get("DeathCause")
    text = str(cause) if cause else "no cause reported"
    for line in text.splitlines():  # the proto's text form: pick its error message
        if "error_message" in line:
            return line.split(":", 1)[1].strip().strip('"')[:300]
    return " ".join(text.split())[:300]


# ---------------------------------------------------------------------------------------------
# The run


@dataclass
class RunResult:
    """What a run left behind, complete or not: the record module turns it into a record."""

    plan: Plan
    rec: Recorder
    ctx: Any
    wiring: Any
    status: str  # ok | failed | interrupted
    error: str | None
    wall0: float
    startup_s: float | None
    load_before: float
    address: str | None
    notes: list[str] = field(default_factory=list)
    actor_nodes: dict[str, str] = field(default_factory=dict)
    # Teardown did not finish within the stop budget: threads are left inside Ray calls, and the
    # process must end with os._exit once the record is written (Ray's exit hooks would block).
    abandoned: bool = False
    stop_s: float | None = None  # from the first signal to the end of teardown
    # the 1-minute load average once the run's processes are gone: with load_before, whether the
    # host was quiet around the run (the run's own load lingers in it for a minute)
    load_after: float | None = None


def execute_session(plan: Plan, *, iterations: int, opts: Any, learner: Any, address: str | None = None,
                    progress: bool = True, stop: threading.Event | None = None, verbose: bool = True,
                    ray_log: Path | None = None, on_session: Callable[[str | None], None] | None = None,
                    after_iteration: Callable[[int], None] | None = None) -> RunResult:
    """Run ``plan`` on Ray. Never raises for a run-time failure: the result says what happened.
    ``after_iteration(k)`` is called from the main loop when the actor finishes iteration k
    (tests use it to fault a node mid-run)."""
    from executor.runtime.driver import Context
    from executor.runtime.modes import wire

    if learner.trained_part != plan.trained_part:  # the ranks train what the plan (and its prediction) says
        raise ConfigError("learner.trained_part", f"must be the plan's trained_part {plan.trained_part!r}; "
                                                  f"got {learner.trained_part!r}")
    stop = stop or threading.Event()
    session = RaySession(address, num_cpus=max(plan.cluster.gpus, os.cpu_count() or 1))
    load_before = os.getloadavg()[0]
    wall0 = time.time()
    rec = Recorder(keep_spans=True)
    ctx = Context(plan, rec, t0=wall0)
    wiring, watch, bar = None, None, None
    actor_nodes: dict[str, str] = {}
    status, error, startup_s = "ok", None, None
    stuck = False  # a thread of the run is still inside a Ray call
    with Signals(stop) as sig, quiet_output(None if verbose else ray_log) as err:
        try:
            # ray.init in a thread of its own; a signal meanwhile abandons it (StartupAbandoned)
            session.start(lambda: sig.first_at is not None)
            if on_session is not None:
                on_session(session.session_dir)
            if stop.is_set():  # stopped by the caller during ray.init: no actors to wait for
                raise KeyboardInterrupt
            if address:
                _check_cluster(plan, address, opts)
            wiring = _interruptible(lambda: wire(ctx, opts, learner), sig)  # actors take minutes to start
            if stop.is_set():  # what was started is torn down below
                raise KeyboardInterrupt
            startup_s = time.time() - wall0
            sig.phase = "running"
            ctx.t0 = time.time()  # the timeline starts once every actor is up
            watch = ActorWatch(wiring.handles, ctx.fail).start()
            actor_nodes = watch.nodes()
            bar = _progress_bar(plan, ctx, iterations, err) if shows_progress(not progress, err) else None
            threads = []
            if wiring.dynamic_batching:
                threads += [threading.Thread(target=g.run, daemon=True) for g in wiring.generators]
            workers = [threading.Thread(target=wk.run, args=(iterations,), daemon=True) for wk in wiring.workers]
            actor = threading.Thread(target=wiring.actor.run, args=(iterations,), daemon=True)
            for t in threads + workers + [actor]:
                t.start()
            seen = 0
            while actor.is_alive() and not stop.is_set() and not ctx.stop.is_set():
                actor.join(0.2)
                done = len(wiring.train_log.iteration_done)
                while after_iteration is not None and seen < done:
                    after_iteration(seen)
                    seen += 1
            sig.phase = "teardown"
            interrupted = stop.is_set() and not ctx.errors
            ctx.stop.set()  # lets the batchers (and anything left) finish
            end = sig.deadline() or time.monotonic() + 5 * len(threads + workers + [actor])
            for t in threads + workers + [actor]:
                t.join(max(0.0, end - time.monotonic()))
            stuck = any(t.is_alive() for t in threads + workers + [actor])
            if ctx.errors:
                status, error = "failed", _describe(ctx.errors, watch)
            elif interrupted:
                status, error = "interrupted", f"interrupted ({sig.reason or 'Ctrl-C'})"
        except ConfigError:
            raise
        except StartupAbandoned:
            ctx.stop.set()
            stuck = True
            status, error = "interrupted", f"interrupted ({sig.reason or 'Ctrl-C'}) during start-up"
        except (KeyboardInterrupt, SystemExit):  # the caller stopped start-up (SystemExit: a handler of Ray's)
            ctx.stop.set()
            sig.reason = sig.reason or "SIGTERM"
            sig.first_at = sig.first_at or time.monotonic()  # no handler of ours saw a signal
            status, error = "interrupted", f"interrupted ({sig.reason or 'Ctrl-C'}) during start-up"
        except Exception as e:  # noqa: BLE001 - actor start-up failures end the run with a record
            ctx.stop.set()
            status, error = "failed", _describe([e], watch)
        finally:
            sig.phase = "teardown"
            if bar is not None:
                bar.close()
            abandoned = _tear_down(session, wiring, watch, sig.deadline(), stuck)
    stop_s = None if sig.first_at is None else time.monotonic() - sig.first_at
    return RunResult(plan, rec, ctx, wiring, status, error, wall0, startup_s, load_before, address,
                     actor_nodes=actor_nodes, abandoned=abandoned, stop_s=stop_s, load_after=os.getloadavg()[0])


class StartupAbandoned(KeyboardInterrupt):
    """A signal stopped the run and start-up did not return within STARTUP_GRACE_S: its thread is
    left inside a Ray call (actors that may never come up: a SIGTERM to the process group also
    ended Ray's GCS)."""


def _within(fn: Callable[[], Any], deadline: float | None) -> bool:
    """Run ``fn``; with a deadline, in a daemon thread given until then. True if it finished."""
    if deadline is None:
        fn()
        return True
    t = threading.Thread(target=_quietly, args=(fn,), daemon=True, name="teardown")
    t.start()
    t.join(max(0.0, deadline - time.monotonic()))
    return not t.is_alive()


def _quietly(fn: Callable[[], Any]) -> None:
    with contextlib.suppress(Exception):
        fn()


def _tear_down(session: RaySession, wiring: Any, watch: ActorWatch | None, deadline: float | None,
               stuck: bool) -> bool:
    """Stop the watch, the actors and Ray. Without a signal, as long as it takes (the actors and
    placement groups are always released: a joined cluster, a test's Ray, outlives the run).
    After one, until ``deadline``; then, or when a thread is left inside a Ray call (``stuck``:
    ``ray.shutdown`` would abort the process), this run's local Ray is killed instead. Returns
    True when the run was abandoned (the process must end with os._exit)."""
    if watch is not None:
        watch.halt(None if deadline is None else max(0.0, deadline - time.monotonic()))
    done = wiring is None or _within(lambda: _teardown(wiring), deadline)
    if deadline is None:
        session.stop()
        return False
    if done and not stuck and _within(session.stop, deadline):
        return False
    session.kill()
    return True


def _interruptible(fn: Callable[[], Any], sig: Signals) -> Any:
    """Run start-up in a thread so that a signal is seen at once: returns ``fn()``'s result. A
    stop the caller sets (no signal) waits for start-up, so that teardown releases what it made
    (a joined or a test's Ray outlives the run). After a signal, start-up gets STARTUP_GRACE_S to
    return; then it is abandoned (StartupAbandoned):
    its thread may wait on actors that never come (a SIGTERM to the process group ends Ray's
    GCS too), and Ray cannot be shut down under it, so teardown kills this run's Ray instead."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=target, daemon=True, name="start-up")
    t.start()
    while t.is_alive() and not sig.stop.is_set():
        t.join(0.2)
        sig.install()  # ray.init (in the thread) replaces the handlers; take them back at once
    if sig.first_at is None:  # stopped by the caller, not a signal: wait, so that teardown frees it
        while t.is_alive():
            t.join(0.2)
    else:
        t.join(STARTUP_GRACE_S)
        if t.is_alive():
            raise StartupAbandoned()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _check_cluster(plan: Plan, address: str, opts: Any) -> None:
    import ray

    res = ray.cluster_resources()
    key = "GPU" if opts.device.startswith("cuda") else "CPU"
    if res.get(key, 0) < plan.cluster.gpus:
        raise ConfigError("plan.cluster.gpus", f"{plan.cluster.gpus} device slots but the Ray cluster "
                          f"at {address} has {res.get(key, 0):g} {key}")
    sizes = [n.get("Resources", {}).get(key, 0.0) for n in ray.nodes() if n.get("Alive")]
    if not fits_on_nodes(plan, sizes):
        c = plan.cluster
        raise ConfigError("plan.cluster.gpus_per_node", f"{c.nodes} node(s) of {c.gpus_per_node} device slots "
                          f"do not fit on the Ray cluster at {address}, whose nodes have "
                          f"{', '.join(f'{x:g}' for x in sorted(sizes, reverse=True))} {key}; "
                          "use the slots per node its nodes have")


def fits_on_nodes(plan: Plan, node_slots: list[float]) -> bool:
    """Whether each node of the plan fits on one Ray node (``modes.wire`` packs a plan node's
    slots onto one Ray node), largest first onto the first Ray node with room."""
    from executor.runtime.modes import node_bundles

    free = sorted(node_slots, reverse=True)
    for need in sorted((len(b) for b in node_bundles(plan, cuda=False)), reverse=True):
        i = next((i for i, f in enumerate(free) if f >= need), None)
        if i is None:
            return False
        free[i] -= need
    return True


def _progress_bar(plan: Plan, ctx: Any, iterations: int, out: Any) -> Any:
    from tqdm import tqdm

    bar = tqdm(total=plan.workload.env_steps_per_iteration * iterations, unit="step", desc=plan.mode,
               file=out, leave=True)

    def tick(n: int) -> None:
        with ctx.lock:
            bar.update(n)
            el = time.time() - ctx.t0
            bar.set_postfix_str(f"{bar.n / el:.2f} env steps/s" if el > 0 else "")
    ctx.progress = tick
    return bar


def _describe(errors: list[BaseException], watch: ActorWatch | None) -> str:
    """One line for the first failure; a dead actor is named with its node."""
    for e in errors:
        if isinstance(e, ActorLost):
            return f"a Ray actor died: {e}"
    e = errors[0]
    name = type(e).__name__
    if "ActorDied" in name or "RayActorError" in name or "ActorUnavailable" in name:
        named = watch.describe(e) if watch is not None else None
        if named is None and watch is not None:  # the GCS may need a moment to mark it DEAD
            for _ in range(20):
                lost = watch.poll()
                if lost is not None:
                    named = str(lost)
                    break
                time.sleep(WATCH_PERIOD_S)
        return f"a Ray actor died ({name}): {named or _first_line(e)}"
    return f"{name}: {_first_line(e)}"


def _teardown(wiring: Any) -> None:
    import ray

    refs = [h.close.remote() for h in wiring.handles["env_workers"]]
    with contextlib.suppress(Exception):  # a dead actor has nothing to close
        ray.wait(refs, num_returns=len(refs), timeout=15)
    for hs in wiring.handles.values():
        for h in hs:
            with contextlib.suppress(Exception):
                ray.kill(h)
    from ray.util.placement_group import remove_placement_group

    for pg in wiring.placement_groups:
        with contextlib.suppress(Exception):
            remove_placement_group(pg)


class RunFailed(Exception):
    """A run that failed or was interrupted: its partial record and recorder; ``abandoned``: the
    process must end with os._exit once the record is written (see RunResult.abandoned)."""

    def __init__(self, message: str, record: dict[str, Any], rec: Recorder, abandoned: bool = False) -> None:
        super().__init__(message)
        self.record, self.rec, self.abandoned = record, rec, abandoned


DEFAULT_ITERATIONS = 3
DEFAULT_WARMUP = 1


def execute(plan: Plan, *, iterations: int = DEFAULT_ITERATIONS, warmup: int = DEFAULT_WARMUP,
            opts: Any = None, progress: bool = True, address: str | None = None, profile: Any = None,
            stop: threading.Event | None = None, verbose: bool = True, ray_log: Path | None = None,
            on_session: Callable[[str | None], None] | None = None,
            after_iteration: Callable[[int], None] | None = None,
            prediction: dict[str, Any] | None = None) -> tuple[dict[str, Any], Recorder]:
    """Run ``plan`` and return (run record, recorder); a failure or interrupt raises RunFailed
    holding the partial record. ``prediction``: the caller's prediction of ``plan`` on ``profile``
    (record.build_record), when it has made one."""
    from executor.learner import LearnerConfig
    from executor.runtime.modes import RunOptions
    from executor.runtime.record import build_record

    opts = opts or RunOptions()
    if warmup >= iterations:
        raise ConfigError("iterations", f"must exceed warmup iterations ({warmup}), got {iterations}")
    learner = LearnerConfig.from_plan(plan, seed=opts.seed)
    result = execute_session(plan, iterations=iterations, opts=opts, learner=learner, address=address,
                             progress=progress, stop=stop, verbose=verbose, ray_log=ray_log,
                             on_session=on_session, after_iteration=after_iteration)
    record = build_record(result, iterations=iterations, warmup=warmup, opts=opts, profile=profile,
                          prediction=prediction)
    if result.status != "ok":
        raise RunFailed(result.error or result.status, record, result.rec, abandoned=result.abandoned)
    return record, result.rec
