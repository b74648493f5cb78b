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

    @property
    def prefix_tokens(self) -> int:
        return self.images * self.image_tokens_per_image + self.prompt_tokens

    @property
    def vision_params(self) -> int:
        return self.vision.params + self.patch * self.patch * 3 * self.vision.width

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
        llm = self.llm.forward_flops(self.prefix_tokens, layers=self.llm_layers_used)
        return vision + llm

    def action_head_flops(self) -> float:
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
        return replace(
            self,
            name=f"{self.name}-{scale}",
            vision=shrink(self.vision, layers_div),
            llm=shrink(self.llm, layers_div),
            llm_layers_used=max(1, self.llm_layers_used // layers_div),
            action_head=shrink(self.action_head, layers_div),
            vocab=max(256, self.vocab // (div * div)),
            image_px=max(self.patch * 4, self.image_px // (2 if scale == "small" else 4)),
            image_tokens_per_image=max(4, self.image_tokens_per_image // (4 if scale == "small" else 16)),
            extra_params=self.extra_params // (div * div),
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
    source="models.md: Eagle 2.5 = SigLIP-2 (So400m shapes) + Qwen3-1.7B (28x2048, 16q/8kv x128, MLP 6144) "
    "using layer 12; DiT 16 layers x 1536 (32 heads x 48) with cross-attention, 4 denoising steps, horizon 16",
)

BACKBONES = {b.name: b for b in (PI05, GR00T_N15)}
SCALES = ("full", "small", "tiny")


def with_trained_part(backbone: Backbone, trained_part: str) -> Backbone:
    """The backbone training ``trained_part`` (plan.trained_part): ``action_expert`` freezes the
    VLM (RL-VLA3 model/pi0_5.yaml ``train_expert_only: True``; GR00T's configs do not tune the
    LLM or the vision tower), ``full`` trains every weight."""
    from perfmodel.schema.errors import ConfigError
    from perfmodel.schema.plan import TRAINED_PARTS

    if trained_part not in TRAINED_PARTS:
        raise ConfigError("trained_part", f"must be {' or '.join(TRAINED_PARTS)}, got {trained_part!r}")
    return replace(backbone, train_vlm=trained_part == "full")


def get_backbone(name: str, scale: str = "full") -> Backbone:
    from perfmodel.schema.errors import ConfigError

    if name not in BACKBONES:
        raise ConfigError("backbone", f"must be one of {', '.join(BACKBONES)}; got {name!r}")
    if scale not in SCALES:
        raise ConfigError("scale", f"must be one of {', '.join(SCALES)}; got {scale!r}")
    return BACKBONES[name].scaled(scale)
