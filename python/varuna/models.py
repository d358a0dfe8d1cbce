"""A small model zoo for Varuna's import, partitioning and exactness tests.

Every model is built only from standard ``torch.nn`` modules and returns the
scalar training loss from ``forward`` (the loss is part of the graph, computed
with ``F.cross_entropy``), so that an exported graph is a complete
"forward + loss" training graph.

    >>> from varuna import models
    >>> model, inputs, names = models.make("gpt")
    >>> loss = model(*inputs)

``make`` seeds the parameter initialisation and the example inputs, so the
same ``(name, seed, cfg)`` always gives bit-identical weights and data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = [
    "GPTConfig", "GPT", "BertConfig", "Bert", "ViTConfig", "ViT",
    "ResNetConfig", "ResNet", "ConvNeXtConfig", "ConvNeXt",
    "make", "names", "example_inputs", "config", "gpt2_xl_shape", "make_gpt2_xl_shape",
]


# ---------------------------------------------------------------------------
# GPT-2 style decoder
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 64
    seq: int = 16          # maximum sequence length (size of the position table)
    hidden: int = 32
    heads: int = 4
    layers: int = 2
    dropout: float = 0.0
    ln_eps: float = 1e-5


class CausalSelfAttention(nn.Module):
    """GPT-2 attention: one fused ``c_attn`` Linear, split into q/k/v, explicit
    matmul/scale/causal-mask/softmax (nanoGPT's non-flash path)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        if cfg.hidden % cfg.heads:
            raise ValueError(f"hidden ({cfg.hidden}) must be divisible by heads ({cfg.heads})")
        self.n_head = cfg.heads
        self.n_embd = cfg.hidden
        self.head_dim = cfg.hidden // cfg.heads
        self.scale = 1.0 / math.sqrt(self.head_dim)  # a Python float: a graph constant
        self.c_attn = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.c_proj = nn.Linear(cfg.hidden, cfg.hidden)
        self.attn_dropout = nn.Dropout(cfg.dropout)
        self.resid_dropout = nn.Dropout(cfg.dropout)
        # nanoGPT / HF GPT-2 style causal mask buffer [1, 1, seq, seq] (bool).
        # Persistent, so it exports as a named initializer (a non-persistent
        # buffer becomes an anonymous Constant node). A torch.tril in forward
        # would need ONNX Trilu, i.e. opset >= 14, and we want opset 13 too.
        self.register_buffer("causal_mask", torch.empty(1, 1, cfg.seq, cfg.seq, dtype=torch.bool),
                             persistent=True)
        self.reset_buffers()

    @torch.no_grad()
    def reset_buffers(self) -> None:
        n = self.causal_mask.size(-1)
        self.causal_mask.copy_(torch.tril(torch.ones(n, n, dtype=torch.bool,
                                                     device=self.causal_mask.device)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        hd = self.head_dim
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)  # [B, nh, T, hd]
        k = k.view(B, T, self.n_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * self.scale
        att = att.masked_fill(~self.causal_mask[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v                                          # [B, nh, T, hd]
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class GPTMLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.hidden, 4 * cfg.hidden)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * cfg.hidden, cfg.hidden)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class GPTBlock(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.hidden, eps=cfg.ln_eps)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.hidden, eps=cfg.ln_eps)
        self.mlp = GPTMLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    """GPT-2 style language model. ``lm_head.weight`` *is* ``wte.weight``."""

    def __init__(self, cfg: GPTConfig = GPTConfig()):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab, cfg.hidden)
        self.wpe = nn.Embedding(cfg.seq, cfg.hidden)
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList([GPTBlock(cfg) for _ in range(cfg.layers)])
        self.ln_f = nn.LayerNorm(cfg.hidden, eps=cfg.ln_eps)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # real tie (one Parameter object)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """GPT-2 initialisation (normal(0, 0.02), scaled residual projections)."""
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * self.cfg.layers))
            elif p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.startswith("ln") or ".ln_" in name:
                nn.init.ones_(p) if name.endswith("weight") else nn.init.zeros_(p)
            else:
                nn.init.zeros_(p)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        B, T = input_ids.size()
        pos = torch.arange(0, T, dtype=torch.long, device=input_ids.device)
        x = self.drop(self.wte(input_ids) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        logits = self.lm_head(x)                              # [B, T, vocab]
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))


# ---------------------------------------------------------------------------
# BERT style encoder with an MLM head
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class BertConfig:
    vocab: int = 64
    seq: int = 16
    hidden: int = 32
    heads: int = 4
    layers: int = 2
    intermediate: int = 64
    type_vocab: int = 2
    dropout: float = 0.0
    ln_eps: float = 1e-12


class BertEmbeddings(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab, cfg.hidden)
        self.position_embeddings = nn.Embedding(cfg.seq, cfg.hidden)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab, cfg.hidden)
        self.LayerNorm = nn.LayerNorm(cfg.hidden, eps=cfg.ln_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        T = input_ids.size(1)
        pos = torch.arange(T, dtype=torch.long, device=input_ids.device).unsqueeze(0)
        token_type_ids = torch.zeros_like(input_ids)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(pos)
             + self.token_type_embeddings(token_type_ids))
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    """Explicit q/k/v Linears (contrast with GPT's fused c_attn)."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        if cfg.hidden % cfg.heads:
            raise ValueError(f"hidden ({cfg.hidden}) must be divisible by heads ({cfg.heads})")
        self.heads = cfg.heads
        self.head_dim = cfg.hidden // cfg.heads
        self.query = nn.Linear(cfg.hidden, cfg.hidden)
        self.key = nn.Linear(cfg.hidden, cfg.hidden)
        self.value = nn.Linear(cfg.hidden, cfg.hidden)
        self.dropout = nn.Dropout(cfg.dropout)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.size()
        return x.view(B, T, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor, ext_mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        scores = scores + ext_mask                        # additive padding mask [B,1,1,S]
        probs = self.dropout(F.softmax(scores, dim=-1))
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        B, T = ctx.size(0), ctx.size(1)
        return ctx.view(B, T, self.heads * self.head_dim)


class BertLayer(nn.Module):
    """Post-LN encoder layer (BERT)."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.attention = BertSelfAttention(cfg)
        self.attn_output = nn.Linear(cfg.hidden, cfg.hidden)
        self.attn_dropout = nn.Dropout(cfg.dropout)
        self.attn_norm = nn.LayerNorm(cfg.hidden, eps=cfg.ln_eps)
        self.intermediate = nn.Linear(cfg.hidden, cfg.intermediate)
        self.output = nn.Linear(cfg.intermediate, cfg.hidden)
        self.out_dropout = nn.Dropout(cfg.dropout)
        self.out_norm = nn.LayerNorm(cfg.hidden, eps=cfg.ln_eps)

    def forward(self, x: torch.Tensor, ext_mask: torch.Tensor) -> torch.Tensor:
        a = self.attn_dropout(self.attn_output(self.attention(x, ext_mask)))
        x = self.attn_norm(x + a)
        h = self.out_dropout(self.output(F.gelu(self.intermediate(x))))  # erf GELU
        return self.out_norm(x + h)


class Bert(nn.Module):
    """BERT encoder + MLM head; the decoder weight is tied to the word embeddings."""

    def __init__(self, cfg: BertConfig = BertConfig()):
        super().__init__()
        self.cfg = cfg
        self.embeddings = BertEmbeddings(cfg)
        self.layer = nn.ModuleList([BertLayer(cfg) for _ in range(cfg.layers)])
        self.mlm_dense = nn.Linear(cfg.hidden, cfg.hidden)
        self.mlm_norm = nn.LayerNorm(cfg.hidden, eps=cfg.ln_eps)
        self.decoder = nn.Linear(cfg.hidden, cfg.vocab)
        self.decoder.weight = self.embeddings.word_embeddings.weight  # tie
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif "norm" in name.lower():
                nn.init.ones_(p) if name.endswith("weight") else nn.init.zeros_(p)
            else:
                nn.init.zeros_(p)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                labels: torch.Tensor) -> torch.Tensor:
        x = self.embeddings(input_ids)
        # [B,S] int64 of 1/0 -> additive mask [B,1,1,S]: 0 keep, -10000 masked.
        ext = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layer:
            x = layer(x, ext)
        x = self.mlm_norm(F.gelu(self.mlm_dense(x)))
        logits = self.decoder(x)
        return F.cross_entropy(logits.view(-1, self.cfg.vocab), labels.view(-1),
                               ignore_index=-100)


# ---------------------------------------------------------------------------
# Vision Transformer
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ViTConfig:
    image: int = 32
    patch: int = 8
    channels: int = 3
    hidden: int = 32
    heads: int = 4
    layers: int = 2
    mlp: int = 64
    classes: int = 10
    dropout: float = 0.0
    ln_eps: float = 1e-6


class ViTBlock(nn.Module):
    """Pre-LN block using nn.MultiheadAttention(batch_first=True)."""

    def __init__(self, cfg: ViTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.hidden, eps=cfg.ln_eps)
        self.self_attention = nn.MultiheadAttention(cfg.hidden, cfg.heads, dropout=cfg.dropout,
                                                    batch_first=True)
        self.dropout = nn.Dropout(cfg.dropout)
        self.ln_2 = nn.LayerNorm(cfg.hidden, eps=cfg.ln_eps)
        self.mlp = nn.Sequential(nn.Linear(cfg.hidden, cfg.mlp), nn.GELU(), nn.Dropout(cfg.dropout),
                                 nn.Linear(cfg.mlp, cfg.hidden), nn.Dropout(cfg.dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(x)
        y, _ = self.self_attention(y, y, y, need_weights=False)
        x = x + self.dropout(y)
        return x + self.mlp(self.ln_2(x))


class ViT(nn.Module):
    def __init__(self, cfg: ViTConfig = ViTConfig()):
        super().__init__()
        if cfg.image % cfg.patch:
            raise ValueError(f"image ({cfg.image}) must be divisible by patch ({cfg.patch})")
        self.cfg = cfg
        n = (cfg.image // cfg.patch) ** 2
        self.conv_proj = nn.Conv2d(cfg.channels, cfg.hidden, kernel_size=cfg.patch, stride=cfg.patch)
        self.class_token = nn.Parameter(torch.zeros(1, 1, cfg.hidden))
        self.pos_embedding = nn.Parameter(torch.empty(1, n + 1, cfg.hidden).normal_(std=0.02))
        self.dropout = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList([ViTBlock(cfg) for _ in range(cfg.layers)])
        self.ln = nn.LayerNorm(cfg.hidden, eps=cfg.ln_eps)
        self.head = nn.Linear(cfg.hidden, cfg.classes)

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x = self.conv_proj(pixel_values)                    # [B, D, h, w]
        x = x.flatten(2).transpose(1, 2)                    # [B, h*w, D]
        cls = self.class_token.expand(x.size(0), -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embedding
        x = self.dropout(x)
        for blk in self.layers:
            x = blk(x)
        x = self.ln(x)
        return F.cross_entropy(self.head(x[:, 0]), labels)


# ---------------------------------------------------------------------------
# ResNet
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ResNetConfig:
    channels: int = 3
    width: int = 16
    classes: int = 10
    image: int = 32


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, cfg: ResNetConfig = ResNetConfig()):
        super().__init__()
        self.cfg = cfg
        w = cfg.width
        self.conv1 = nn.Conv2d(cfg.channels, w, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = nn.Sequential(BasicBlock(w, w), BasicBlock(w, w))
        self.layer2 = nn.Sequential(BasicBlock(w, 2 * w, stride=2), BasicBlock(2 * w, 2 * w))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2 * w, cfg.classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(pixel_values))))
        x = self.layer2(self.layer1(x))
        x = torch.flatten(self.avgpool(x), 1)
        return F.cross_entropy(self.fc(x), labels)


# ---------------------------------------------------------------------------
# ConvNeXt
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ConvNeXtConfig:
    channels: int = 3
    dims: Tuple[int, ...] = (16, 32)
    depths: Tuple[int, ...] = (1, 1)
    classes: int = 10
    image: int = 32
    layer_scale: float = 1e-6
    ln_eps: float = 1e-6


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channel dim of an NCHW tensor (torchvision style)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int, layer_scale: float, eps: float):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=eps)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), float(layer_scale)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 3, 1)          # NCHW -> NHWC
        y = self.pwconv2(self.act(self.pwconv1(self.norm(y))))
        y = (self.gamma * y).permute(0, 3, 1, 2)         # NHWC -> NCHW
        return x + y


class ConvNeXt(nn.Module):
    def __init__(self, cfg: ConvNeXtConfig = ConvNeXtConfig()):
        super().__init__()
        if len(cfg.dims) != len(cfg.depths):
            raise ValueError("dims and depths must have the same length")
        self.cfg = cfg
        d0 = cfg.dims[0]
        self.stem = nn.Sequential(nn.Conv2d(cfg.channels, d0, kernel_size=4, stride=4),
                                  LayerNorm2d(d0, eps=cfg.ln_eps))
        self.stages = nn.ModuleList()
        self.downsample = nn.ModuleList()
        for i, (dim, depth) in enumerate(zip(cfg.dims, cfg.depths)):
            if i > 0:
                self.downsample.append(nn.Sequential(
                    LayerNorm2d(cfg.dims[i - 1], eps=cfg.ln_eps),
                    nn.Conv2d(cfg.dims[i - 1], dim, kernel_size=2, stride=2)))
            self.stages.append(nn.Sequential(
                *[ConvNeXtBlock(dim, cfg.layer_scale, cfg.ln_eps) for _ in range(depth)]))
        self.norm = nn.LayerNorm(cfg.dims[-1], eps=cfg.ln_eps)
        self.head = nn.Linear(cfg.dims[-1], cfg.classes)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x = self.stem(pixel_values)
        for i, stage in enumerate(self.stages):
            if i > 0:
                x = self.downsample[i - 1](x)
            x = stage(x)
        x = self.norm(x.mean(dim=(-2, -1)))               # global average pool
        return F.cross_entropy(self.head(x), labels)


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------

def _token_inputs(cfg, batch: int, g: torch.Generator, with_mask: bool):
    ids = torch.randint(0, cfg.vocab, (batch, cfg.seq), generator=g, dtype=torch.int64)
    labels = torch.randint(0, cfg.vocab, (batch, cfg.seq), generator=g, dtype=torch.int64)
    if not with_mask:
        return (ids, labels)
    # Right padding: each row keeps a random-length prefix (at least half).
    lengths = torch.randint(cfg.seq // 2, cfg.seq + 1, (batch,), generator=g)
    mask = (torch.arange(cfg.seq)[None, :] < lengths[:, None]).to(torch.int64)
    # MLM-style labels: ~15% of real tokens predicted, the rest ignored (-100).
    pick = (torch.rand((batch, cfg.seq), generator=g) < 0.15) & (mask == 1)
    pick[:, 0] = True  # at least one label per row so the loss is well defined
    labels = torch.where(pick, labels, torch.full_like(labels, -100))
    return (ids, mask, labels)


def _image_inputs(cfg, batch: int, g: torch.Generator):
    x = torch.randn((batch, cfg.channels, cfg.image, cfg.image), generator=g, dtype=torch.float32)
    y = torch.randint(0, cfg.classes, (batch,), generator=g, dtype=torch.int64)
    return (x, y)


@dataclass(frozen=True)
class _Entry:
    config: type
    build: Callable
    inputs: Callable
    input_names: Tuple[str, ...]


_ZOO: Dict[str, _Entry] = {
    "gpt": _Entry(GPTConfig, GPT, lambda c, b, g: _token_inputs(c, b, g, False),
                  ("input_ids", "labels")),
    "bert": _Entry(BertConfig, Bert, lambda c, b, g: _token_inputs(c, b, g, True),
                   ("input_ids", "attention_mask", "labels")),
    "vit": _Entry(ViTConfig, ViT, _image_inputs, ("pixel_values", "labels")),
    "resnet": _Entry(ResNetConfig, ResNet, _image_inputs, ("pixel_values", "labels")),
    "convnext": _Entry(ConvNeXtConfig, ConvNeXt, _image_inputs, ("pixel_values", "labels")),
}


def names() -> List[str]:
    """Names of the zoo models, in a fixed order."""
    return list(_ZOO)


def _entry(name: str) -> _Entry:
    try:
        return _ZOO[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(_ZOO)}") from None


def config(name: str, **cfg):
    """The config dataclass instance for ``name`` with ``cfg`` overrides."""
    e = _entry(name)
    known = {f.name for f in fields(e.config)}
    bad = sorted(set(cfg) - known)
    if bad:
        raise ValueError(f"unknown config key(s) {bad} for model {name!r}; known: {sorted(known)}")
    for k, v in list(cfg.items()):
        if isinstance(v, list):
            cfg[k] = tuple(v)
    return replace(e.config(), **cfg)


def example_inputs(name: str, batch: int = 2, seed: int = 0, **cfg) -> tuple:
    """Deterministic example inputs for ``name`` with the given batch size.

    Uses its own generator (seeded with ``seed + 1``) so the global RNG is untouched."""
    c = config(name, **cfg)
    g = torch.Generator().manual_seed(seed + 1)
    return tuple(_entry(name).inputs(c, batch, g))


def make(name: str, seed: int = 0, batch: int = 2, **cfg):
    """Build zoo model ``name``.

    Returns ``(model, example_inputs, input_names)``: the model is in training
    mode with weights initialised from ``torch.manual_seed(seed)``; the inputs
    have batch size ``batch`` (default 2)."""
    e = _entry(name)
    c = config(name, **cfg)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = e.build(c)
    model.train()
    return model, example_inputs(name, batch=batch, seed=seed, **cfg), list(e.input_names)


# ---------------------------------------------------------------------------
# GPT-2 XL shaped benchmark model
# ---------------------------------------------------------------------------

def gpt2_xl_shape(**overrides) -> GPTConfig:
    """GPT-2 XL dimensions (1.56 B parameters, ~6.2 GB fp32). For benchmarks only."""
    base = dict(vocab=50257, seq=1024, hidden=1600, heads=25, layers=48, dropout=0.0)
    base.update(overrides)
    return GPTConfig(**base)


def make_gpt2_xl_shape(seed: int = 0, batch: int = 1, input_len: int | None = None, **overrides):
    """Build a GPT with ``gpt2_xl_shape`` dimensions, allocating each weight once.

    The module tree is constructed on the ``meta`` device (no memory, no init
    cost), materialised with ``to_empty`` and then initialised in place by
    ``GPT.reset_parameters`` from a seeded RNG, so peak memory is about one copy
    of the weights. (The weights therefore differ from ``GPT(cfg)`` built
    eagerly with the same seed, whose default inits consume the RNG first.)
    ``overrides`` change the config (e.g. ``layers=16``); ``input_len`` sets
    the example inputs' sequence length (default: the config's full ``seq``).

    Returns ``(model, example_inputs, input_names)`` like ``make``."""
    cfg = gpt2_xl_shape(**overrides)
    with torch.device("meta"):
        model = GPT(cfg)
    model = model.to_empty(device="cpu")
    model.lm_head.weight = model.wte.weight  # to_empty may re-wrap parameters: re-tie
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model.reset_parameters()
    for m in model.modules():
        if isinstance(m, CausalSelfAttention):
            m.reset_buffers()  # to_empty left the causal masks uninitialised
    model.train()
    g = torch.Generator().manual_seed(seed + 1)
    s = cfg.seq if input_len is None else input_len
    ids = torch.randint(0, cfg.vocab, (batch, s), generator=g)
    labels = torch.randint(0, cfg.vocab, (batch, s), generator=g)
    return model, (ids, labels), ["input_ids", "labels"]
