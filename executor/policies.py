"""Architecture-faithful stand-ins for pi0.5, pi0, GR00T N1.5 / N1.6, OpenVLA-OFT and RLinf's MLP policy, with random weights.

Each policy is built from the layer shapes in ``perfmodel.backbones`` (so the executor and the cost
model agree): a vision transformer over every camera image, a language-model prefix over image
and prompt tokens, and a flow-matching action head that denoises an action chunk in
``denoise_steps`` Euler steps. Step time does not depend on weight values, so these cost what the
real models cost (../shared/reference/models.md).

- pi0.5: the action expert (a Gemma-300M-like stack) attends, layer by layer, to the KV cache of the
  VLM prefix (openpi's shared attention); the whole policy is trained.
- GR00T N1.5: only the first ``llm_layers_used`` LLM layers run (features from an intermediate
  layer); VLM frozen; a trained VL self-attention adapter, then a DiT action head with
  self-attention over the chunk tokens and cross-attention to the VLM features.
- pi0: pi0.5's structure (same shapes); GR00T N1.6: N1.5's with a 32-layer DiT and no adapter.
- OpenVLA-OFT: two vision towers (DINOv2 + SigLIP) fused per patch, Llama 2 7B, and parallel
  decoding: the chunk's action tokens run in the LLM's prefix pass (no action head, no denoising);
  the stand-in reads one action dimension off each token (the real model reads token logits).
- RLinf's MLP policy (``MLPPolicyNet``): no VLA; three tanh layers on the joint state, as RLinf's.

For PPO/GRPO each policy has a value head and a tractable action log-probability: the executed
chunk is a Gaussian around the denoised chunk, ``a ~ N(mu(obs, noise), diag(exp(log_std))^2)``,
where ``noise`` (the flow's starting point) is stored with the sample, so the learner recomputes
``mu`` and the log-probability exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from perfmodel.backbones import (Backbone, MlpPolicy, Transformer, default_trained_part, get_backbone,
                                 with_denoising, with_trained_part)
from perfmodel.schema.errors import ConfigError

STATE_DIM = 9  # executor.envs.STATE_DIM (kept here so policies import without LIBERO)
ACTION_BINS = 256  # OpenVLA: each action dimension discretised into 256 bins, the last 256 token ids


# ---------------------------------------------------------------------------------------------
# Building blocks (shapes from a perfmodel ``Transformer`` spec)


class Attention(nn.Module):
    """Multi-head attention with grouped-query K/V: q_dim = heads * head_dim, kv_dim = kv_heads *
    head_dim (need not equal width). Projections without bias, as the spec counts them."""

    def __init__(self, spec: Transformer) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = spec.heads, spec.kv_heads or spec.heads, spec.head_dim
        self.q = nn.Linear(spec.width, spec.q_dim, bias=False)
        self.k = nn.Linear(spec.width, spec.kv_dim, bias=False)
        self.v = nn.Linear(spec.width, spec.kv_dim, bias=False)
        self.o = nn.Linear(spec.q_dim, spec.width, bias=False)

    def split(self, x: torch.Tensor, heads: int) -> torch.Tensor:  # (B, T, h*d) -> (B, h, T, d)
        b, t, _ = x.shape
        return x.view(b, t, heads, self.head_dim).transpose(1, 2)

    def kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.split(self.k(x), self.kv_heads), self.split(self.v(x), self.kv_heads)

    def attend(self, q_in: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q = self.split(self.q(q_in), self.heads)  # (B, H, Tq, d)
        if self.kv_heads != self.heads:  # grouped-query attention: share each K/V head
            rep = self.heads // self.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        out = F.scaled_dot_product_attention(q, k, v)  # (B, H, Tq, d)
        b, _, t, _ = out.shape
        return self.o(out.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, spec: Transformer) -> None:
        super().__init__()
        self.gated = spec.gated_mlp
        self.up = nn.Linear(spec.width, spec.mlp, bias=False)
        self.gate = nn.Linear(spec.width, spec.mlp, bias=False) if spec.gated_mlp else None
        self.down = nn.Linear(spec.mlp, spec.width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.gate(x), approximate="tanh") * self.up(x) if self.gate is not None else F.gelu(self.up(x))
        return self.down(h)


class Block(nn.Module):
    """Pre-norm transformer layer; optional prefix K/V (attend to a cached prefix too) and
    optional cross-attention to precomputed context K/V."""

    def __init__(self, spec: Transformer) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(spec.width)
        self.attn = Attention(spec)
        self.cross = Attention(spec) if spec.cross_attn else None
        self.norm_c = nn.LayerNorm(spec.width, elementwise_affine=False) if spec.cross_attn else None
        self.norm2 = nn.LayerNorm(spec.width)
        self.mlp = MLP(spec)

    def forward(self, x: torch.Tensor, prefix_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
                context_kv: tuple[torch.Tensor, torch.Tensor] | None = None):
        h = self.norm1(x)
        k, v = self.attn.kv(h)  # this layer's own K/V (returned for caching)
        ka, va = (torch.cat([prefix_kv[0], k], 2), torch.cat([prefix_kv[1], v], 2)) if prefix_kv else (k, v)
        x = x + self.attn.attend(h, ka, va)
        if self.cross is not None and context_kv is not None:
            x = x + self.cross.attend(self.norm_c(x), *context_kv)
        x = x + self.mlp(self.norm2(x))
        return x, (k, v)


def sinusoidal(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Flow-matching time embedding: t (B,) in [0, 1] -> (B, dim)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10_000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    ang = t.float()[:, None] * 1000.0 * freqs[None]
    emb = torch.cat([ang.sin(), ang.cos()], -1)
    return F.pad(emb, (0, dim - emb.shape[-1]))


def tokenize(texts: list[str], length: int, vocab: int) -> torch.Tensor:
    """Byte-level stand-in tokenizer: fixed ``length`` ids per prompt (token count is what costs)."""
    out = np.zeros((len(texts), length), np.int64)
    for i, s in enumerate(texts):
        ids = [1 + (b % (vocab - 1)) for b in s.encode()][:length]
        out[i, : len(ids)] = ids
    return torch.from_numpy(out)


# ---------------------------------------------------------------------------------------------
# The policy


@dataclass(frozen=True)
class PolicyOutput:
    actions: torch.Tensor  # (B, chunk, action_dim) executed actions (sampled)
    mean: torch.Tensor  # (B, chunk, action_dim) denoised chunk
    noise: torch.Tensor  # (B, chunk, action_dim) flow starting point (stored for log-prob)
    logprob: torch.Tensor  # (B,) log N(actions | mean, std), summed over chunk and action dims
    value: torch.Tensor  # (B,)


class VLAPolicy(nn.Module):
    """A VLA policy with the layer shapes of ``backbone`` (see module docstring)."""

    def __init__(self, backbone: Backbone, action_dim: int = 7, log_std_init: float = -1.0) -> None:
        super().__init__()
        b = self.backbone = backbone
        self.action_dim = action_dim
        self.chunk = b.action_chunk
        vw, lw, aw = b.vision.width, b.llm.width, b.action_head.width
        self.grid = b.image_px // b.patch
        # vision tower (SigLIP-like), one pass per camera image
        self.patch_embed = nn.Conv2d(3, vw, b.patch, stride=b.patch, bias=False)
        self.pos_embed = nn.Parameter(torch.randn(self.grid * self.grid, vw) * 0.02)
        self.vision = nn.ModuleList(Block(b.vision) for _ in range(b.vision.layers))
        self.vision_norm = nn.LayerNorm(vw)
        # OpenVLA's second tower (DINOv2 beside SigLIP): same patches, features concatenated per token
        v2 = b.vision2
        self.patch_embed2 = nn.Conv2d(3, v2.width, b.patch, stride=b.patch, bias=False) if v2 else None
        self.pos_embed2 = nn.Parameter(torch.randn(self.grid * self.grid, v2.width) * 0.02) if v2 else None
        self.vision2 = nn.ModuleList(Block(v2) for _ in range(v2.layers)) if v2 else nn.ModuleList()
        self.vision_norm2 = nn.LayerNorm(v2.width) if v2 else None
        if v2:  # Prismatic's fused GELU MLP projector (OpenVLA): fused width -> 4x -> LLM width -> LLM width
            vd = vw + v2.width
            self.vision_proj = nn.Sequential(nn.Linear(vd, 4 * vd), nn.GELU(), nn.Linear(4 * vd, lw), nn.GELU(),
                                             nn.Linear(lw, lw))
        else:
            self.vision_proj = nn.Linear(vw, lw, bias=False)
        # OFT parallel decoding: one input embedding per action token (chunk x action_dim), decoded
        # in the LLM's prefix pass; each token's LM-head logits over the last ACTION_BINS token ids
        # give one action dimension (OpenVLA's binned actions; the expectation over the bins here)
        n_act = b.action_tokens
        self.action_queries = nn.Parameter(torch.randn(n_act, lw) * 0.02) if n_act else None
        self.lm_head = nn.Linear(lw, b.vocab, bias=False) if n_act else None
        # language model: all layers exist (weights), the first llm_layers_used run
        self.embed = nn.Embedding(b.vocab, lw)
        self.llm = nn.ModuleList(Block(b.llm) for _ in range(b.llm.layers))
        self.llm_norm = nn.LayerNorm(lw)
        # action head: chunk tokens + one state/time token
        self.head = nn.ModuleList(Block(b.action_head) for _ in range(b.action_head.layers))
        self.cross = b.action_head.cross_attn
        if b.has_action_expert:
            self.action_in = nn.Linear(action_dim, aw)
            self.state_in = nn.Linear(STATE_DIM, aw)
            self.time_mlp = nn.Sequential(nn.Linear(aw, aw), nn.SiLU(), nn.Linear(aw, aw))
            self.head_norm = nn.LayerNorm(aw)
            self.action_out = nn.Linear(aw, action_dim)
        if not b.has_action_expert:  # OFT: no action head, no adapter
            self.adapter = nn.ModuleList()
            self.kv_adapt = None
        elif self.cross:
            # GR00T: trained VL self-attention adapter over the VLM features, then a projection to
            # the DiT width; the adapter's depth fills the spec's extra_params (its stated content)
            adapter_spec = Transformer(layers=1, width=lw, heads=max(1, b.llm.heads), head_dim=b.llm.head_dim,
                                       mlp=4 * lw)
            # (none for GR00T N1.6, which dropped the adapter: its extra_params are the encoders)
            n_adapter = round(0.8 * b.extra_params / adapter_spec.layer_params)
            self.adapter = nn.ModuleList(Block(adapter_spec) for _ in range(n_adapter))
            self.ctx_proj = nn.Linear(lw, aw, bias=False)
            self.kv_adapt = None
        else:
            # pi0.5: expert layer i attends to the prefix K/V of LLM layer map[i]
            self.adapter = nn.ModuleList()
            llm_kv, head_kv = (b.llm.kv_heads or b.llm.heads, b.llm.head_dim), (
                b.action_head.kv_heads or b.action_head.heads, b.action_head.head_dim)
            self.kv_adapt = None if llm_kv == head_kv else nn.Linear(b.llm.kv_dim, b.action_head.kv_dim, bias=False)
        self.value_head = nn.Sequential(nn.Linear(lw, 256 if lw >= 256 else lw), nn.Tanh(),
                                        nn.Linear(256 if lw >= 256 else lw, 1))
        self.log_std = nn.Parameter(torch.full((action_dim,), float(log_std_init)))
        if not b.train_vlm:  # frozen VLM (trained_part action_expert): no gradients, no optimizer state
            for m in (self.patch_embed, self.vision, self.vision_norm, self.vision_proj, self.embed, self.llm,
                      self.llm_norm, self.vision2, self.patch_embed2, self.vision_norm2):
                if m is not None:
                    m.requires_grad_(False)
            for prm in (self.pos_embed, self.pos_embed2):
                if prm is not None:
                    prm.requires_grad_(False)

    # --- sizes ---
    @property
    def device(self) -> torch.device:
        return self.log_std.device

    @property
    def dtype(self) -> torch.dtype:
        return self.log_std.dtype

    def param_counts(self) -> dict[str, int]:
        total = sum(p.numel() for p in self.parameters())
        trained = sum(p.numel() for p in self.parameters() if p.requires_grad)
        return {"total": total, "trained": trained}

    def weight_bytes(self) -> int:
        """Bytes of all weights (weight sync to generators, offload)."""
        return sum(p.numel() * p.element_size() for p in self.parameters())

    def grad_bytes(self) -> int:
        """Bytes of the trained parameters' gradients (all-reduced per optimizer step)."""
        return sum(p.numel() * p.element_size() for p in self.parameters() if p.requires_grad)

    def inference_flops(self, batch: int) -> float:
        """One chunk-generation call for ``batch`` observations, counted from the shapes."""
        return batch * self.backbone.inference_flops()

    def train_flops(self, micro_batch: int) -> float:
        return micro_batch * self.backbone.train_flops()

    def inference_bytes(self, batch: int) -> float:
        """Bytes moved per call: prefix weights read once, head weights once per denoising step,
        plus the prefix KV cache (or cross-attention context) read per step."""
        b = self.backbone
        el = self.log_std.element_size()
        prefix_w = (b.vision_params + b.llm.layer_params * b.llm_layers_used) * el
        head_w = b.action_head.params * el
        kv = batch * b.prefix_tokens * b.action_head.kv_dim * 2 * b.action_head.layers * el
        return float(prefix_w + b.denoise_steps * (head_w + kv))

    def train_bytes(self, micro_batch: int) -> float:
        """Forward bytes + gradient bytes written + the re-read of trained weights in backward."""
        return self.inference_bytes(micro_batch) + 2.0 * self.grad_bytes()

    # --- observation encoding ---
    def prepare(self, obs: dict[str, Any]) -> dict[str, torch.Tensor]:
        """Env observations -> tensors: images (B, n_img, H, W, 3) uint8 -> (B, n_img, 3, px, px)
        in the policy dtype; state (B, 9); prompt ids (B, prompt_tokens)."""
        dev, dt = self.device, self.dtype
        imgs = torch.as_tensor(np.asarray(obs["images"]), device=dev)
        bsz, n = imgs.shape[:2]
        x = imgs.reshape(bsz * n, *imgs.shape[2:]).permute(0, 3, 1, 2).to(dt) / 255.0
        px = self.backbone.image_px
        if x.shape[-1] != px:
            x = F.interpolate(x.float(), size=(px, px), mode="bilinear", align_corners=False).to(dt)
        if n < self.backbone.images:
            raise ValueError(f"policy needs {self.backbone.images} images per observation, got {n}")
        x = x.view(bsz, n, 3, px, px)[:, : self.backbone.images]
        prompt = obs.get("prompt")
        if prompt is None:
            prompt = tokenize(obs.get("language", [""] * bsz), self.backbone.prompt_tokens, self.backbone.vocab)
        return {
            "images": x.contiguous(),
            "state": torch.as_tensor(np.asarray(obs["state"]), device=dev).to(dt),
            "prompt": torch.as_tensor(prompt, device=dev),
        }

    def encode_prefix(self, t: dict[str, torch.Tensor]):
        """Vision + LLM prefix -> (features (B, P, lw), per-layer K/V cache or cross context)."""
        b = self.backbone
        imgs = t["images"]  # (B, n_img, 3, px, px)
        bsz = imgs.shape[0]
        flat = imgs.flatten(0, 1)
        x = self.patch_embed(flat).flatten(2).transpose(1, 2)  # (B*n_img, grid^2, vw)
        x = x + self.pos_embed.to(x.dtype)
        for blk in self.vision:
            x, _ = blk(x)
        x = self.vision_norm(x)
        if self.patch_embed2 is not None:  # the second tower, concatenated per patch token
            x2 = self.patch_embed2(flat).flatten(2).transpose(1, 2) + self.pos_embed2.to(x.dtype)
            for blk in self.vision2:
                x2, _ = blk(x2)
            x = torch.cat([x, self.vision_norm2(x2)], -1)
        if x.shape[1] != b.image_tokens_per_image:  # pixel shuffle / pooling to the token count
            x = F.adaptive_avg_pool1d(x.transpose(1, 2), b.image_tokens_per_image).transpose(1, 2)
        x = self.vision_proj(x).reshape(bsz, b.images * b.image_tokens_per_image, -1)  # (B, img tokens, lw)
        h = torch.cat([x, self.embed(t["prompt"])], 1)  # (B, prefix_tokens, lw)
        if self.action_queries is not None:  # parallel decoding: the action tokens join the prefix pass
            h = torch.cat([h, self.action_queries.to(h.dtype).expand(bsz, -1, -1)], 1)
        kvs = []
        for blk in self.llm[: b.llm_layers_used]:
            h, kv = blk(h)
            kvs.append(kv)
        return self.llm_norm(h), kvs

    def head_context(self, feats: torch.Tensor, kvs: list) -> tuple[list, torch.Tensor]:
        """Per action-head layer: the K/V that layer attends to (computed once per call and reused
        by every denoising step), and the features the value head pools."""
        if self.cross:
            ctx = feats
            for blk in self.adapter:  # GR00T's trained VL self-attention adapter
                ctx, _ = blk(ctx)
            proj = self.ctx_proj(ctx)  # (B, P, aw)
            return [blk.cross.kv(blk.norm_c(proj)) for blk in self.head], ctx
        n_head, n_llm = len(self.head), len(kvs)
        out = []
        for i in range(n_head):
            k, v = kvs[min(n_llm - 1, i * n_llm // n_head)]  # (B, kv_heads, P, head_dim)
            if self.kv_adapt is not None:  # only if a scaled spec's K/V shapes differ
                hd = self.backbone.action_head.head_dim
                k, v = (self.kv_adapt(z.transpose(1, 2).flatten(2)) for z in (k, v))
                k, v = (z.view(z.shape[0], z.shape[1], -1, hd).transpose(1, 2) for z in (k, v))
            out.append((k, v))
        return out, feats

    def velocity(self, x_t: torch.Tensor, tau: torch.Tensor, state: torch.Tensor, ctx: list) -> torch.Tensor:
        """Flow velocity for the chunk x_t (B, chunk, adim) at time tau (B,)."""
        temb = self.time_mlp(sinusoidal(tau, self.time_mlp[0].in_features).to(x_t.dtype))[:, None]  # (B,1,aw)
        tokens = torch.cat([self.state_in(state)[:, None], self.action_in(x_t)], 1) + temb  # (B, chunk+1, aw)
        for blk, kv in zip(self.head, ctx):
            tokens, _ = blk(tokens, context_kv=kv) if self.cross else blk(tokens, prefix_kv=kv)
        return self.action_out(self.head_norm(tokens[:, 1:]))  # (B, chunk, adim)

    def denoise(self, t: dict[str, torch.Tensor], noise: torch.Tensor):
        """Euler integration of the flow from noise (tau=1) to the action chunk (tau=0)."""
        b = self.backbone
        if b.train_vlm or not torch.is_grad_enabled():
            feats, kvs = self.encode_prefix(t)
        else:
            with torch.no_grad():  # frozen VLM: forward only
                feats, kvs = self.encode_prefix(t)
        if self.action_queries is not None:  # OFT: the chunk is read off the action tokens, no denoising
            n_act = self.action_queries.shape[0]
            bins = min(ACTION_BINS, self.lm_head.out_features)
            probs = self.lm_head(feats[:, -n_act:])[..., -bins:].float().softmax(-1)  # (B, n_act, bins)
            centres = torch.linspace(-1.0, 1.0, bins, device=probs.device)
            acts = (probs @ centres).to(feats.dtype).view(feats.shape[0], self.chunk, self.action_dim)
            value = self.value_head(feats[:, :-n_act].mean(1)).squeeze(-1)
            return acts + 0.0 * noise.to(acts.dtype), value
        ctx, pooled_feats = self.head_context(feats, kvs)
        x = noise.to(self.dtype)
        dt = 1.0 / b.denoise_steps
        for k in range(b.denoise_steps):
            tau = torch.full((x.shape[0],), 1.0 - k * dt, device=x.device)
            x = x - dt * self.velocity(x, tau, t["state"], ctx)
        value = self.value_head(pooled_feats.mean(1)).squeeze(-1)  # (B,)
        return x, value

    def _dist(self, mean: torch.Tensor) -> torch.distributions.Normal:
        return torch.distributions.Normal(mean.float(), self.log_std.float().exp().expand_as(mean))

    @torch.no_grad()
    def generate(self, obs: dict[str, Any], generator: torch.Generator | None = None,
                 deterministic: bool = False) -> PolicyOutput:
        """One chunk-generation call (rollout): prefix, denoising, sample, log-prob, value."""
        t = self.prepare(obs)
        bsz = t["state"].shape[0]
        shape = (bsz, self.chunk, self.action_dim)
        noise = torch.randn(shape, generator=generator, device="cpu").to(self.device)
        mean, value = self.denoise(t, noise)
        dist = self._dist(mean)
        eps = torch.randn(shape, generator=generator, device="cpu").to(self.device)
        actions = mean.float() if deterministic else mean.float() + dist.stddev * eps
        return PolicyOutput(actions, mean.float(), noise.float(), dist.log_prob(actions).sum((1, 2)), value.float())

    def nft_velocities(self, obs: dict[str, Any], x0: torch.Tensor, tau: torch.Tensor, noise: torch.Tensor,
                       old: bool = True):
        """NFT's training forward (RLinf 0.3.0 fsdp_nft_policy_worker.py with nft_xcur_source
        resample): x_t interpolated from the stored chunk ``x0`` (B, chunk, adim) and ``noise`` at
        ``tau`` (B,); (v, v_old, target): the velocity at x_t with grad, the same forward again
        without grad for v_old (_recompute_v_old, as RLinf runs it: prefix and one head step), and
        the flow's target velocity (noise - x0, this policy integrating from tau=1 to 0)."""
        t = self.prepare(obs)
        x0, noise = x0.to(self.device, self.dtype), noise.to(self.device, self.dtype)
        x_t = (1 - tau[:, None, None]).to(x0.dtype) * x0 + tau[:, None, None].to(x0.dtype) * noise

        def forward() -> torch.Tensor:
            if self.backbone.train_vlm and torch.is_grad_enabled():
                feats, kvs = self.encode_prefix(t)
            else:
                with torch.no_grad():  # frozen VLM: forward only
                    feats, kvs = self.encode_prefix(t)
            ctx, _ = self.head_context(feats, kvs)
            return self.velocity(x_t, tau.to(self.device), t["state"], ctx)

        v = forward()
        if not old:  # supervised flow matching (DAgger's SFT): one velocity evaluation only
            return v, None, noise - x0
        with torch.no_grad():
            v_old = forward()
        return v, v_old, noise - x0

    def evaluate(self, obs: dict[str, Any], noise: torch.Tensor, actions: torch.Tensor):
        """Training forward: (logprob (B,), entropy (B,), value (B,)) of stored samples."""
        t = self.prepare(obs)
        mean, value = self.denoise(t, noise.to(self.device))
        dist = self._dist(mean)
        return dist.log_prob(actions.to(self.device).float()).sum((1, 2)), dist.entropy().sum((1, 2)), value.float()


class MLPPolicyNet(nn.Module):
    """RLinf's MLP policy (rlinf 0.3.0 models/embodiment/mlp_policy/mlp_policy.py) with random
    weights, in the interface of ``VLAPolicy``: three tanh layers on the joint state, a linear
    action mean with an independent log-std (a Gaussian, as RLinf samples), and a value head of
    the same three layers (modules/value_head.py). The images and prompt of an observation are not
    read (RLinf's ``preprocess_env_obs`` keeps ``states`` only); its first ``obs_dim`` state
    values are. The stored ``noise`` is unused (no flow): the learner's interface carries it."""

    def __init__(self, backbone: Backbone, log_std_init: float = -0.5) -> None:
        super().__init__()
        b = self.backbone = backbone
        self.action_dim, self.chunk = b.action_dim, b.action_chunk
        dims = [b.obs_dim, *b.hidden]

        def trunk() -> nn.Sequential:
            layers: list[nn.Module] = []
            for a, c in zip(dims, dims[1:]):
                layers += [nn.Linear(a, c), nn.Tanh()]
            return nn.Sequential(*layers)

        self.trunk = trunk()
        self.actor_mean = nn.Linear(dims[-1], b.action_dim)
        self.log_std = nn.Parameter(torch.full((b.action_dim,), float(log_std_init)))  # actor_logstd
        self.value_head = nn.Sequential(trunk(), nn.Linear(dims[-1], 1, bias=False))

    device, dtype = VLAPolicy.device, VLAPolicy.dtype
    param_counts, weight_bytes, grad_bytes = VLAPolicy.param_counts, VLAPolicy.weight_bytes, VLAPolicy.grad_bytes
    inference_flops, train_flops, train_bytes = VLAPolicy.inference_flops, VLAPolicy.train_flops, VLAPolicy.train_bytes
    _dist = VLAPolicy._dist

    def inference_bytes(self, batch: int) -> float:
        """Every weight read once per call."""
        return float(self.weight_bytes())

    def _states(self, obs: dict[str, Any]) -> torch.Tensor:
        st = torch.as_tensor(np.asarray(obs["state"]), device=self.device).to(self.dtype)
        n = self.backbone.obs_dim
        return st[:, :n] if st.shape[1] >= n else F.pad(st, (0, n - st.shape[1]))

    def _forward(self, obs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        st = self._states(obs)
        mean = self.actor_mean(self.trunk(st))  # (B, action_dim): one action per call
        mean = mean[:, None].expand(-1, self.chunk, -1)
        return mean, self.value_head(st).squeeze(-1)

    @torch.no_grad()
    def generate(self, obs: dict[str, Any], generator: torch.Generator | None = None,
                 deterministic: bool = False) -> PolicyOutput:
        """predict_action_batch: action mean, sample, log-prob, value."""
        mean, value = self._forward(obs)
        dist = self._dist(mean)
        eps = torch.randn(mean.shape, generator=generator, device="cpu").to(self.device)
        actions = mean.float() if deterministic else mean.float() + dist.stddev * eps
        return PolicyOutput(actions, mean.float(), torch.zeros_like(actions), dist.log_prob(actions).sum((1, 2)),
                            value.float())

    def evaluate(self, obs: dict[str, Any], noise: torch.Tensor, actions: torch.Tensor):
        """default_forward: (logprob (B,), entropy (B,), value (B,)) of stored samples."""
        mean, value = self._forward(obs)
        dist = self._dist(mean)
        return dist.log_prob(actions.to(self.device).float()).sum((1, 2)), dist.entropy().sum((1, 2)), value.float()


def resolve_device(device: str) -> torch.device:
    """``cpu``, ``cuda[:N]`` (must exist) or ``auto`` (CUDA when available, else CPU)."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ConfigError("device", f"must be cpu, cuda[:N] or auto, got {device!r}")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError("device", f"{device} is not available on this machine (no CUDA device)")
        try:
            idx = int(device.split(":")[1]) if ":" in device else 0
        except ValueError:
            raise ConfigError("device", f"must be cpu, cuda[:N] or auto, got {device!r}") from None
        if idx >= torch.cuda.device_count():
            raise ConfigError("device", f"{device} is not available ({torch.cuda.device_count()} CUDA devices)")
    return torch.device(device)


def make_policy(name: str, scale: str = "tiny", device: str = "auto", seed: int = 0,
                dtype: torch.dtype | None = None, trained_part: str | None = None,
                denoising_steps: int | None = None, action_horizon: int | None = None) -> VLAPolicy | MLPPolicyNet:
    """A stand-in policy: bf16 on CUDA, float32 on CPU (unless ``dtype`` is given); ``device``
    ``meta`` builds it without allocating (parameter counts of the full scale). ``trained_part``
    (plan.trained_part; None: what RLinf trains, ``default_trained_part``) decides which weights take
    gradients and optimizer state; ``denoising_steps`` and ``action_horizon`` (plan fields, None: the
    backbone's own) set the flow's steps and the chunk the model predicts."""
    spec = with_denoising(get_backbone(name, scale), denoising_steps, action_horizon)
    backbone = with_trained_part(spec, trained_part or default_trained_part(spec))
    dev = torch.device("meta") if device == "meta" else resolve_device(device)
    if dtype is None:
        dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    torch.manual_seed(seed)
    with dev:
        policy = MLPPolicyNet(backbone) if isinstance(backbone, MlpPolicy) else VLAPolicy(backbone)
    return policy.to(dtype=dtype)
