"""What ``executor profile`` measures: the profile request, checked before any measurement."""

from __future__ import annotations

from dataclasses import dataclass


from perfmodel.backbones import default_trained_part, get_backbone, with_trained_part
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.plan import TRAINED_PARTS



@dataclass(frozen=True)
class ProfileConfig:
    backbone: str
    scale: str
    out: str
    device: str = "cpu"
    suite: str = "libero_spatial"
    task_id: int = 0
    image_size: int = 128
    env_counts: tuple[int, ...] = (1, 2, 4)
    env_repeats: int = 3  # measured chunks per env count (after one warm-up chunk)
    reset_repeats: int = 2
    batch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    train_sizes: tuple[int, ...] = (1, 2, 4, 8)
    repeats: int = 5  # measured calls per model size (after warm-up)
    sync_mb: tuple[float, ...] = (1, 4, 16, 64)
    gpus_per_node: int | None = None
    env_profile: str | None = None  # take env costs from this measured profile instead of measuring
    driver_chunk_steps: int = 6  # chunk steps of the driver measurement per stepping kind; 0: none
    # which weights the training measurement trains (plan.trained_part); None: what RLinf trains
    # (backbones.default_trained_part: the action expert, the whole policy for OpenVLA-OFT)
    trained_part: str | None = None
    run_share: tuple[str, ...] = ()  # modes whose env CPU share a short run measures (executor.profiling.runshare)
    command: str = ""

    def check(self) -> None:
        spec = get_backbone(self.backbone, self.scale)  # ConfigError for unknown backbone / scale
        if self.trained_part is None:
            object.__setattr__(self, "trained_part", default_trained_part(spec))
        from executor.envs import SUITES

        if self.suite not in SUITES:
            raise ConfigError("suite", f"must be one of {', '.join(SUITES)}; got {self.suite!r}")
        if not 0 <= self.task_id < 10:
            raise ConfigError("task_id", f"must be in 0..9, got {self.task_id}")
        if self.driver_chunk_steps < 0:
            raise ConfigError("driver-chunk-steps", f"must be an integer >= 0, got {self.driver_chunk_steps}")
        for name in ("image_size", "env_repeats", "reset_repeats", "repeats"):
            v = getattr(self, name)
            if v < 1:
                raise ConfigError(name.replace("_", "-"), f"must be an integer >= 1, got {v}")
        for name in ("env_counts", "batch_sizes", "train_sizes", "sync_mb"):
            v = getattr(self, name)
            if not v or any(x <= 0 for x in v):
                raise ConfigError(name.replace("_", "-"), f"must be a list of positive sizes, got {list(v)}")
        if self.env_profile is None and 1 not in self.env_counts:
            raise ConfigError("env-counts", f"must include 1 (one env alone on one core), got {list(self.env_counts)}")
        if self.trained_part not in TRAINED_PARTS:
            raise ConfigError("trained-part", f"must be {' or '.join(TRAINED_PARTS)}, got {self.trained_part!r}")
        if self.run_share and self.env_profile is not None:
            raise ConfigError("run-share", "not with --env-profile: the envs' share of this host's cores says nothing "
                                           "of envs whose costs were measured on another host")
        try:
            with_trained_part(spec, self.trained_part)
        except ConfigError as e:
            raise ConfigError("trained-part", e.message) from None
        if self.gpus_per_node is not None and self.gpus_per_node < 1:
            raise ConfigError("gpus-per-node", f"must be an integer >= 1, got {self.gpus_per_node}")
        from executor.policies import resolve_device

        object.__setattr__(self, "device", str(resolve_device(self.device)))  # auto -> cpu / cuda
        if self.env_profile is not None:
            from executor.profiling.envcosts import load_env_costs

            load_env_costs(self.env_profile)


