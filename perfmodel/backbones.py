"""Layer shapes of the VLA backbones and what their cost depends on: parameters, FLOPs, bytes.

Pure Python (no torch), so the simulator can turn shapes into physically grounded cost priors
and the executor can build architecture-faithful stand-in policies from the same numbers.
Sources: ../shared/reference/models.md (approximate public facts); each spec says where its
numbers come from. Counts are matmul FLOPs (2 per multiply-add) plus attention score/value FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

BF16_BYTES = 2


@dataclass(frozen=True)
class Transformer:
    """A pre-norm transformer stack. ``kv_heads`` < ``heads`` is grouped-query attention;
    ``gated_mlp`` is a GeGLU/SwiGLU MLP (three matrices) instead of two; ``cross_attn`` adds a
    cross-attention block per layer (DiT action heads)."""

    layers: int
    width: int
    heads: int
    head_dim: int
    mlp: int
    kv_heads: int | None = None
    gated_mlp: bool = False
    cross_attn: bool = False

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return (self.kv_heads or self.heads) * self.head_dim

    @property
    def attn_params(self) -> int:
        return self.width * self.q_dim * 2 + self.width * self.kv_dim * 2

    @property
    def mlp_params(self) -> int:
        return self.width * self.mlp * (3 if self.gated_mlp else 2)

    @property
    def layer_params(self) -> int:
        return self.attn_params * (2 if self.cross_attn else 1) + self.mlp_params + 4 * self.width

    @property
    def params(self) -> int:
        return self.layers * self.layer_params

    def forward_flops(self, tokens: int, context: int = 0, layers: int | None = None) -> float:
        """FLOPs of one sequence of ``tokens`` through ``layers`` layers, attending to
        ``context`` extra (cached prefix / cross-attention) tokens besides themselves."""
        n = self.layers if layers is None else layers
        per_layer = 2.0 * tokens * self.layer_params
        per_layer += 4.0 * tokens * (tokens + context) * self.q_dim  # scores + weighted values
        return n * per_layer


def train_state_bytes(params: int, trained: int) -> float:
    """bf16 weights + fp32 master weights, gradients and two Adam moments of the trained part."""
    return float((params - trained) * BF16_BYTES + trained * (BF16_BYTES + 4 + 4 + 8))


@dataclass(frozen=True)
class Backbone:
    """A VLA policy: vision encoder -> language model prefix -> iterative action head."""

    name: str
    vision: Transformer
    patch: int
    image_px: int
    images: int
    image_tokens_per_image: int  # after any pooling / pixel shuffle
    llm: Transformer
    llm_layers_used: int
    vocab: int
    prompt_tokens: int
    action_head: Transformer
    action_chunk: int
    action_dim: int
    denoise_steps: int
    extra_params: int  # projections, state/action encoders, value head
    train_vlm: bool
    published_params: float
    source: str
    # A second vision tower run on the same patches, its features concatenated with the first's
    # per token (OpenVLA's fused DINOv2 + SigLIP encoder); None: one tower.
    vision2: Transformer | None = None
    # Parallel decoding (OpenVLA-OFT): no action head; the chunk's action_chunk x action_dim
    # action tokens run through the LLM in the same pass as the prefix, with denoise_steps 1.
    parallel_decoding: bool = False
    # Whether the chunk length (action_chunk) is the model's own horizon that a config sets
    # (openpi's action_chunk, OFT's chunk) or fixed by the model whatever the env executes
    # (GR00T's DiT horizon 16: RLinf's num_action_chunks is how many of them the env executes).
    horizon_from_config: bool = True

    @property
    def prefix_tokens(self) -> int:
        return self.images * self.image_tokens_per_image + self.prompt_tokens

    @property
    def action_tokens(self) -> int:
        """Action tokens decoded in the LLM pass (parallel decoding), else 0."""
        return self.action_chunk * self.action_dim if self.parallel_decoding else 0

    @property
    def has_action_expert(self) -> bool:
        return self.action_head.layers > 0

    @property
    def vision_params(self) -> int:
        towers = (self.vision,) + ((self.vision2,) if self.vision2 is not None else ())
        return sum(t.params + self.patch * self.patch * 3 * t.width for t in towers)

    @property
    def llm_params(self) -> int:
        return self.llm.params + self.vocab * self.llm.width

    @property
    def params(self) -> int:
        return self.vision_params + self.llm_params + self.action_head.params + self.extra_params

    @property
    def trained_params(self) -> int:
        head = self.action_head.params + self.extra_params
        return head + (self.vision_params + self.llm_params if self.train_vlm else 0)

    # --- FLOPs per sample (one env's observation -> one action chunk) ---
    def prefix_flops(self) -> float:
        patches = (self.image_px // self.patch) ** 2
        vision = self.images * self.vision.forward_flops(patches)
        if self.vision2 is not None:
            vision += self.images * self.vision2.forward_flops(patches)
        llm = self.llm.forward_flops(self.prefix_tokens + self.action_tokens, layers=self.llm_layers_used)
        return vision + llm

    def action_head_flops(self) -> float:
        if not self.has_action_expert:
            return 0.0
        tokens = self.action_chunk + 1  # chunk tokens + state/time token
        return self.denoise_steps * self.action_head.forward_flops(tokens, context=self.prefix_tokens)

    def inference_flops(self) -> float:
        return self.prefix_flops() + self.action_head_flops()

    def train_flops(self) -> float:
        """Forward of the whole denoising chain (log-prob recomputation) plus backward (2x
        forward) of the trained part; a frozen VLM runs forward only."""
        fwd = self.inference_flops()
        trained_fwd = self.action_head_flops() + (self.prefix_flops() if self.train_vlm else 0.0)
        return fwd + 2.0 * trained_fwd

    def nft_train_flops(self) -> float:
        """A training sample of RLinf's NFT (rlinf 0.3.0 workers/actor/fsdp_nft_policy_worker.py,
        openpi_action_model.py nft_forward): one velocity evaluation at one timestep (the prefix
        forward and one action-head step) with backward of the trained part, and the same forward
        again without grad for v_old (_recompute_v_old: with recompute_v, and always with
        nft_xcur_source resample, as RLinf's LIBERO NFT config sets it). No denoising chain."""
        step = self.action_head_flops() / max(self.denoise_steps, 1)
        once = self.prefix_flops() + step
        return self.sft_train_flops() + once

    def sft_train_flops(self) -> float:
        """A training sample of supervised flow matching, as RLinf's DAgger trains (rlinf 0.3.0
        workers/actor/fsdp_dagger_policy_worker.py forward_actor -> openpi_action_model.py
        sft_forward -> PI0Pytorch.forward): one velocity evaluation at a sampled timestep (the
        prefix forward and one action-head step) with backward of the trained part; no
        denoising chain, no second forward."""
        step = self.action_head_flops() / max(self.denoise_steps, 1)
        once = self.prefix_flops() + step
        trained_fwd = step + (self.prefix_flops() if self.train_vlm else 0.0)
        return once + 2.0 * trained_fwd

    # --- bytes ---
    def weight_bytes(self) -> float:
        """bf16 weights of the whole policy (weight sync to generators, offload)."""
        return float(self.params * BF16_BYTES)

    def grad_bytes(self) -> float:
        return float(self.trained_params * BF16_BYTES)

    def train_state_bytes(self) -> float:
        return train_state_bytes(self.params, self.trained_params)

    def scaled(self, scale: str) -> "Backbone":
        """Same structure at ``full`` (real shapes), ``small`` or ``tiny`` (for CPU runs)."""
        if scale == "full":
            return self
        div = {"small": 4, "tiny": 16}[scale]

        def shrink(t: Transformer, layers_div: int) -> Transformer:
            heads = max(1, t.heads // div)
            kv = None if t.kv_heads is None else max(1, t.kv_heads // div) if t.kv_heads > 1 else 1
            return replace(
                t,
                layers=max(1, t.layers // layers_div),
                width=max(32, t.width // div),
                heads=heads,
                kv_heads=kv,
                head_dim=max(8, t.head_dim // max(1, div // 4)),
                mlp=max(64, t.mlp // div),
            )

        layers_div = {"small": 3, "tiny": 9}[scale]
        vocab = max(256, self.vocab // (div * div))
        extra = self.extra_params // (div * div)
        if self.parallel_decoding:  # the untied LM head in extra_params shrinks with vocab and width
            lm_head = self.vocab * self.llm.width
            extra = (self.extra_params - lm_head) // (div * div) + vocab * max(32, self.llm.width // div)
        return replace(
            self,
            name=f"{self.name}-{scale}",
            vision=shrink(self.vision, layers_div),
            vision2=None if self.vision2 is None else shrink(self.vision2, layers_div),
            llm=shrink(self.llm, layers_div),
            llm_layers_used=max(1, self.llm_layers_used // layers_div),
            action_head=shrink(self.action_head, layers_div) if self.has_action_expert else self.action_head,
            vocab=vocab,
            image_px=max(self.patch * 4, self.image_px // (2 if scale == "small" else 4)),
            image_tokens_per_image=max(4, self.image_tokens_per_image // (4 if scale == "small" else 16)),
            extra_params=extra,
        )


# pi0.5 (openpi): SigLIP So400m/14 + Gemma 2B + Gemma-300M-like action expert (models.md).
PI05 = Backbone(
    name="pi05",
    vision=Transformer(layers=27, width=1152, heads=16, head_dim=72, mlp=4304),
    patch=14,
    image_px=224,
    images=2,
    image_tokens_per_image=256,
    llm=Transformer(layers=18, width=2048, heads=8, kv_heads=1, head_dim=256, mlp=16384, gated_mlp=True),
    llm_layers_used=18,
    vocab=257_152,
    prompt_tokens=48,  # task prompt plus discretised state tokens
    action_head=Transformer(layers=18, width=1024, heads=8, kv_heads=1, head_dim=256, mlp=4096, gated_mlp=True),
    action_chunk=10,  # RLinf LIBERO RL configs
    action_dim=7,
    denoise_steps=4,  # RLinf LIBERO configs use 3 to 5
    extra_params=2_000_000,  # action in/out projections, time MLP, value head
    # The published setup trains the action expert (RL-VLA3 model/pi0_5.yaml train_expert_only:
    # True); plan.trained_part "full" trains every weight (with_trained_part).
    train_vlm=False,
    published_params=3.3e9,
    source="models.md: SigLIP So400m/14 (27x1152, MLP 4304), Gemma 2B (18x2048, 8q/1kv heads x256, MLP 16384), "
    "Gemma-300M expert (18x1024, MLP 4096, head dim 256); chunk 10; 3-5 denoising steps (4 used)",
)

# GR00T N1.5: Eagle 2.5 (SigLIP-2 + Qwen-family 1.7B LLM, features from layer 12, frozen) + DiT
# action head (flow matching, 4 denoising steps, horizon 16) that is trained (models.md).
GR00T_N15 = Backbone(
    name="gr00t_n15",
    vision=Transformer(layers=27, width=1152, heads=16, head_dim=72, mlp=4304),
    patch=14,
    image_px=224,
    images=2,
    image_tokens_per_image=64,  # 256 patches, 2x2 pixel shuffle
    llm=Transformer(layers=28, width=2048, heads=16, kv_heads=8, head_dim=128, mlp=6144, gated_mlp=True),
    llm_layers_used=12,
    vocab=151_936,
    prompt_tokens=32,
    action_head=Transformer(layers=16, width=1536, heads=32, head_dim=48, mlp=6144, cross_attn=True),
    action_chunk=16,
    action_dim=7,
    denoise_steps=4,
    extra_params=120_000_000,  # VL self-attention adapter, state/action encoders/decoders, value head
    train_vlm=False,
    published_params=3.0e9,
    horizon_from_config=False,  # the DiT's horizon is the model's; num_action_chunks is what the env executes
    source="models.md: Eagle 2.5 = SigLIP-2 (So400m shapes) + Qwen3-1.7B (28x2048, 16q/8kv x128, MLP 6144) "
    "using layer 12; DiT 16 layers x 1536 (32 heads x 48) with cross-attention, 4 denoising steps, horizon 16",
)

# pi0 (openpi pi0_libero, as RLinf trains it): PaliGemma 3B (SigLIP So400m/14 + Gemma 2B) and the
# Gemma-300M action expert; the same shapes as pi0.5 (models.md; openpi's gemma_2b / gemma_300m
# configs). It differs where cost barely moves: the state enters as one continuous token of the
# expert's suffix (chunk + 1 tokens, as counted) and the prompt carries no state tokens.
PI0 = replace(
    PI05,
    name="pi0",
    prompt_tokens=48,  # openpi Pi0Config max_token_len 48 for pi0 (pi0.5 adds the discretised state)
    action_chunk=10,  # RLinf model/pi0.yaml num_action_chunks 10 -> openpi.action_chunk (openpi's own default: 50)
    denoise_steps=4,  # RLinf model/pi0.yaml num_steps 4 -> openpi.num_steps (openpi's own default: 10)
    extra_params=2_000_000,  # action in/out projections, action-time MLP, value head (as pi0.5's)
    train_vlm=False,  # RLinf model/pi0.yaml openpi.train_expert_only: True
    published_params=3.3e9,  # pi0 paper (Black et al. 2024): 3B VLM + 300M action expert
    source="cited: PaliGemma 3B = SigLIP So400m/14 (27x1152, MLP 4304) + Gemma 2B (18x2048, 8q/1kv x256, MLP "
    "16384) (models.md, openpi gemma_2b); Gemma-300M expert (18x1024, MLP 4096, head dim 256, openpi gemma_300m); "
    "2 images (RLinf model/pi0.yaml num_images_in_input 2); chunk 10 and 4 denoising steps (RLinf model/pi0.yaml; "
    "openpi defaults 50 and 10); derived: prompt 48 tokens (openpi max_token_len), extra 2M as pi0.5's",
)

# OpenVLA-OFT (RLinf's openvla_oft, implement_version rlinf): OpenVLA's Prismatic VLM (DINOv2
# ViT-L/14 + SigLIP So400m/14 fused per patch, Llama 2 7B) with OFT's parallel decoding: the
# chunk's action tokens run through the LLM in the prefix pass (one forward, no denoising).
OPENVLA_OFT = Backbone(
    name="openvla_oft",
    vision=Transformer(layers=24, width=1024, heads=16, head_dim=64, mlp=4096),  # DINOv2 ViT-L/14
    vision2=Transformer(layers=27, width=1152, heads=16, head_dim=72, mlp=4304),  # SigLIP So400m/14
    patch=14,
    image_px=224,  # RLinf model/openvla_oft.yaml image_size [224, 224]
    images=1,  # RLinf model/openvla_oft.yaml num_images_in_input 1
    image_tokens_per_image=256,  # 16 x 16 patches, the two towers' features concatenated per patch
    llm=Transformer(layers=32, width=4096, heads=32, head_dim=128, mlp=11008, gated_mlp=True),  # Llama 2 7B
    llm_layers_used=32,
    vocab=32_000,  # RLinf model/openvla_oft.yaml vocab_size 32000
    prompt_tokens=50,  # RLinf model/openvla_oft.yaml max_prompt_length 50 (libero_spatial configs: 128)
    action_head=Transformer(layers=0, width=4096, heads=32, head_dim=128, mlp=11008),  # none: parallel decoding
    action_chunk=8,  # RLinf model/openvla_oft.yaml num_action_chunks 8 (OFT's LIBERO chunk)
    action_dim=7,
    denoise_steps=1,
    # the untied LM head (32000 x 4096 = 131M) + the fused GELU MLP projector (2176 -> 8704 -> 4096 -> 4096,
    # about 71M) + value head
    extra_params=203_000_000,
    train_vlm=True,  # RLinf's OFT configs: is_lora False, FSDP over the whole policy
    published_params=7.5e9,  # OpenVLA (Kim et al. 2024): a 7B-parameter VLA; about 7.5B with both encoders
    parallel_decoding=True,
    source="cited: DINOv2 ViT-L/14 (24x1024, 16 heads, MLP 4096) + SigLIP So400m/14 (27x1152, MLP 4304) at 224 px "
    "(OpenVLA paper), Llama 2 7B (32x4096, 32 heads x128, SwiGLU 11008; vocab 32000, hidden 4096 in RLinf "
    "model/openvla_oft.yaml), 1 image, prompt 50, chunk 8 (RLinf model/openvla_oft.yaml); OFT parallel decoding "
    "(Kim et al. 2025): 8x7 action tokens in the prefix pass; derived: projector and LM head 203M",
)

# GR00T N1.6 (RLinf's gr00t_n1d6): the N1.5 structure with a DiT twice as deep (32 layers, GR00T
# N1.6 release notes) and no post-VLM adapter (N1.6 unfreezes the VLM's top layers instead); the VLM's
# layer types are N1.5's (RLinf's gr00t_n1d6 config wraps Qwen3DecoderLayer and Siglip2EncoderLayer).
GR00T_N16 = replace(
    GR00T_N15,
    name="gr00t_n16",
    action_head=Transformer(layers=32, width=1536, heads=32, head_dim=48, mlp=6144, cross_attn=True),
    action_chunk=16,  # RLinf libero_spatial_ppo_gr00t_n1d6.yaml num_action_chunks 16 (the model's horizon)
    denoise_steps=4,  # RLinf libero_spatial_ppo_gr00t_n1d6.yaml denoising_steps 4
    extra_params=30_000_000,  # state/action encoders and decoders, value head; no VL adapter (assumed size)
    train_vlm=False,
    published_params=3.0e9,  # the model card's name: GR00T-N1.6-3B
    source="cited: SigLIP-2 + Qwen3 layers (RLinf gr00t_n1d6 no_split_modules; shapes as N1.5's Eagle 2.5, "
    "models.md), DiT 32 layers (GR00T N1.6 release notes; N1.5: 16) x 1536, horizon 16 and 4 denoising steps "
    "(RLinf config); assumed: features from LLM layer 12 and 2 images as N1.5, extra 30M (no VL adapter)",
)

_NO_LAYERS = Transformer(layers=0, width=0, heads=0, head_dim=0, mlp=0)


def _mlp_params(dims: list[int], bias_last: bool = True) -> int:
    """Weights and biases of a stack of linear layers ``dims[0] -> ... -> dims[-1]``."""
    n = sum(a * b + b for a, b in zip(dims, dims[1:]))
    return n if bias_last else n - dims[-1]


@dataclass(frozen=True)
class MlpPolicy(Backbone):
    """RLinf's MLP policy (rlinf 0.3.0 models/embodiment/mlp_policy/mlp_policy.py, ``MLPPolicy``
    with ``add_value_head``): no vision, no language model; three tanh layers of ``hidden`` on the
    joint state (``obs_dim``), a linear action mean, a state-independent log-std, and a value head
    of the same three layers (modules/value_head.py, last layer without bias). One action per
    call whatever the chunk (``actor_mean`` is ``action_dim`` wide). RLinf trains all of it."""

    obs_dim: int = 8
    hidden: tuple[int, ...] = (256, 256, 256)

    def _trunk(self) -> list[int]:
        return [self.obs_dim, *self.hidden]

    def _linear_params(self) -> int:
        """The linear layers' weights and biases: the trunk, the action mean and the value head
        (every parameter but the log-std, and each one multiply-add per sample)."""
        return (_mlp_params(self._trunk()) + _mlp_params([self.hidden[-1], self.action_dim])
                + _mlp_params([*self._trunk(), 1], bias_last=False))

    @property
    def vision_params(self) -> int:
        return 0

    @property
    def llm_params(self) -> int:
        return 0

    @property
    def params(self) -> int:
        return self._linear_params() + self.action_dim  # + actor_logstd

    @property
    def trained_params(self) -> int:
        return self.params

    def prefix_flops(self) -> float:
        return 0.0

    def action_head_flops(self) -> float:
        return 0.0

    def inference_flops(self) -> float:
        """predict_action_batch: the trunk, the action mean and the value head (calculate_values)."""
        return 2.0 * self._linear_params()

    def train_flops(self) -> float:
        """default_forward (trunk, mean, value head) with backward (2x forward): all trained."""
        return 3.0 * self.inference_flops()

    def sft_train_flops(self) -> float:
        return self.train_flops()

    def nft_train_flops(self) -> float:
        return self.train_flops()

    def weight_bytes(self) -> float:
        """fp32 weights (model/mlp_policy.yaml precision "32")."""
        return float(self.params * 4)

    def grad_bytes(self) -> float:
        return float(self.trained_params * 4)

    def scaled(self, scale: str) -> "MlpPolicy":
        """The MLP is already small enough for a CPU: every scale is its real shape."""
        return self if scale == "full" else replace(self, name=f"{self.name}-{scale}")


# RLinf's MLP policy as libero_spatial_0_grpo_mlp.yaml sets it (model/mlp_policy.yaml with
# obs_dim 8, action_dim 7; num_action_chunks 1): 0.27M parameters, all trained.
MLP_POLICY = MlpPolicy(
    name="mlp_policy",
    vision=_NO_LAYERS,
    patch=1,
    image_px=0,
    images=0,
    image_tokens_per_image=0,
    llm=_NO_LAYERS,
    llm_layers_used=0,
    vocab=0,
    prompt_tokens=0,
    action_head=_NO_LAYERS,
    action_chunk=1,  # RLinf model/mlp_policy.yaml num_action_chunks 1
    action_dim=7,  # libero_spatial_0_grpo_mlp.yaml actor.model.action_dim 7
    denoise_steps=1,
    extra_params=0,
    train_vlm=True,  # the whole policy is trained (no VLM to freeze)
    published_params=0.27e6,  # derived from the cited shapes (no published count)
    horizon_from_config=False,  # actor_mean is action_dim wide: the cost does not follow the chunk
    obs_dim=8,  # libero_spatial_0_grpo_mlp.yaml actor.model.obs_dim 8 (model/mlp_policy.yaml: 42)
    hidden=(256, 256, 256),  # mlp_policy.py: Linear(obs_dim, 256) and two Linear(256, 256), tanh
    source="cited: rlinf 0.3.0 models/embodiment/mlp_policy/mlp_policy.py (three 256-wide tanh layers, a "
    "linear action mean, an independent log-std, a ValueHead of hidden sizes (256, 256, 256)); obs_dim 8, "
    "action_dim 7 (libero_spatial_0_grpo_mlp.yaml), num_action_chunks 1 (model/mlp_policy.yaml)",
)

BACKBONES = {b.name: b for b in (PI05, GR00T_N15, PI0, OPENVLA_OFT, GR00T_N16, MLP_POLICY)}
# The calibrated backbones (published throughput fits them: profiles/<name>.json); the others get
# profiles from the shared calibration and their shapes (perfmodel.calibration.uncalibrated).
CALIBRATED = ("pi05", "gr00t_n15")
# A backbone not calibrated -> the calibrated one of its family (same code path and VLM), whose
# per-backbone parameters are its central values; none: the calibrated backbones' geometric mean.
FAMILY = {"pi0": "pi05", "gr00t_n16": "gr00t_n15", "openvla_oft": None, "mlp_policy": None}
# A backbone whose compute is a vanishing part of every call (RLinf's MLP policy: 0.27M parameters
# on the joint state) -> the bundled profile of its stand-in measured by executor profile. Its
# fixed times per inference call, micro-batch and optimizer step are that profile's (a launch-bound
# MLP costs on a GPU what its host path costs), not the calibration's, which were fitted to two
# VLAs' pipelines; and it does no host work per observation of its own (no images or prompt).
LAUNCH_BOUND = {"mlp_policy": "mlp_policy_tiny_cpu"}


def with_denoising(backbone: Backbone, steps: int | None = None, horizon: int | None = None) -> Backbone:
    """The backbone with ``steps`` denoising steps and an action horizon of ``horizon`` (None:
    its own). A horizon is the model's where the config sets it (``horizon_from_config``); GR00T's
    DiT keeps its own whatever the env executes."""
    changes: dict = {}
    if steps is not None and not backbone.parallel_decoding:
        changes["denoise_steps"] = steps
    if horizon is not None and backbone.horizon_from_config:
        changes["action_chunk"] = horizon
    return replace(backbone, **changes) if changes else backbone
SCALES = ("full", "small", "tiny")


def with_trained_part(backbone: Backbone, trained_part: str) -> Backbone:
    """The backbone training ``trained_part`` (plan.trained_part): ``action_expert`` freezes the
    VLM (RL-VLA3 model/pi0_5.yaml ``train_expert_only: True``; GR00T's configs do not tune the
    LLM or the vision tower), ``full`` trains every weight."""
    from perfmodel.schema.errors import ConfigError
    from perfmodel.schema.plan import TRAINED_PARTS

    if trained_part not in TRAINED_PARTS:
        raise ConfigError("trained_part", f"must be {' or '.join(TRAINED_PARTS)}, got {trained_part!r}")
    if trained_part == "action_expert" and not backbone.has_action_expert:
        raise ConfigError("trained_part", f"must be full for {backbone.name}: it has no action expert (parallel "
                                          "decoding in the LLM; RLinf trains the whole policy)")
    return replace(backbone, train_vlm=trained_part == "full")


def default_trained_part(backbone: Backbone) -> str:
    """What RLinf's configs train: the action expert / head (VLM frozen) where there is one, else
    the whole policy (OpenVLA-OFT)."""
    return "action_expert" if backbone.has_action_expert else "full"


def get_backbone(name: str, scale: str = "full") -> Backbone:
    from perfmodel.schema.errors import ConfigError

    if name not in BACKBONES:
        raise ConfigError("backbone", f"must be one of {', '.join(BACKBONES)}; got {name!r}")
    if scale not in SCALES:
        raise ConfigError("scale", f"must be one of {', '.join(SCALES)}; got {scale!r}")
    return BACKBONES[name].scaled(scale)


@dataclass(frozen=True)
class DsrlNets:
    """The small networks RLinf's DSRL trains beside a frozen openpi VLA (rlinf 0.3.0
    models/embodiment/openpi/openpi_action_model.py __init__ with ``use_dsrl``; shapes from
    models/embodiment/modules/compact_encoders.py and gaussian_policy.py; sizes are
    OpenPi0Config's defaults, which RLinf's LIBERO DSRL configs set again): an actor and a critic
    image encoder (LightweightImageEncoder64: the agent-view image resized to 64 x 64, four 3x3
    convolutions of 32 filters, the first with stride 2, then a linear layer from 32 x 32 x 32
    to the latent), two state encoders, a Gaussian noise policy (an MLP to the mean and log-std of
    the action noise) and ``q_heads`` Q networks. The VLA's weights are frozen (``freeze_vlm``)."""

    state_dim: int = 8  # openpi.dsrl_state_dim
    noise_dim: int = 32  # openpi.dsrl_action_noise_dim
    q_heads: int = 10  # openpi.dsrl_num_q_heads
    image_latent: int = 64  # openpi.dsrl_image_latent_dim
    state_latent: int = 64  # openpi.dsrl_state_latent_dim
    hidden: tuple[int, ...] = (128, 128, 128)  # openpi.dsrl_hidden_dims
    image_px: int = 64  # LightweightImageEncoder64
    filters: int = 32

    def encoder_macs(self) -> int:
        """Multiply-adds of one image through LightweightImageEncoder64."""
        out = self.image_px // 2  # the first convolution's stride 2
        positions = out * out * self.filters
        convs = positions * 3 * 9 + 3 * positions * self.filters * 9
        return convs + positions * self.image_latent

    def encoder_params(self) -> int:
        f = self.filters
        flat = (self.image_px // 2) ** 2 * f
        return (3 * 9 * f + f) + 3 * (f * 9 * f + f) + flat * self.image_latent + self.image_latent * 3

    def _mlp_params(self, dims: list[int]) -> int:
        return sum(a * b + b for a, b in zip(dims, dims[1:]))

    def q_params(self) -> int:
        dims = [self.state_latent + self.image_latent + self.noise_dim, *self.hidden, 1]
        return self.q_heads * self._mlp_params(dims)

    def policy_params(self) -> int:
        dims = [self.state_latent + self.image_latent, *self.hidden, 2 * self.noise_dim]  # mean and log-std
        return self._mlp_params(dims)

    @property
    def params(self) -> int:
        state = self.state_dim * self.state_latent + self.state_latent * 3
        return 2 * (self.encoder_params() + state) + self.q_params() + self.policy_params()

    def train_flops(self) -> float:
        """FLOPs of one replay sample in one gradient step (rlinf 0.3.0
        workers/actor/fsdp_sac_policy_worker.py update_one_epoch): the critic's loss
        (forward_critic: the noise policy on the next observation and the target critic on it,
        without grad; the critic on the current one with grad), the actor's (forward_actor: the
        noise policy with grad, the critic's Q heads on its noise with the encoder detached) and
        the temperature's (forward_alpha: the noise policy without grad). Ten image-encoder
        passes (a backward counted as two forwards), the MLPs' likewise; the VLA runs in none."""
        enc = 2.0 * self.encoder_macs()
        q, pol = 2.0 * self.q_params(), 2.0 * self.policy_params()
        critic = (enc + pol) + (enc + q) + 3.0 * (enc + q)
        actor = 3.0 * (enc + pol) + (enc + 3.0 * q)
        alpha = enc + pol
        return critic + actor + alpha


# EMA of the target model in DSRL's soft update (fsdp_sac_policy_worker.py
# soft_update_target_model, with the float32 shadow of _init_target_shadow): per parameter of
# the whole model, the frozen VLA's included, every gradient step: shadow.mul_ (read and write
# 4 bytes each), online.float() (read 2, write 4), add_ (read 4 + 4, write 4),
# shadow.to(bf16) (read 4, write 2) and target.copy_ (read 2, write 2).
SOFT_UPDATE_BYTES_PER_PARAM = 36
