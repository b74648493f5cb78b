"""The real components a plan runs: LIBERO env workers (``envs``), pi0.5 / GR00T N1.5 stand-in
policies built from ``perfmodel.backbones`` (``policies``), the PPO/GRPO learner (``learner``),
versioned weight sync (``weight_sync``) and the profiler behind ``executor profile``
(``profiling``, one module per measurement suite; ``cli``). Torch, MuJoCo and LIBERO are imported by these modules only; perfmodel
never imports executor."""
