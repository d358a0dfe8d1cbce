"""Tests for varuna.export, varuna.models and varuna.testmodels.

Run: python3 -m pytest -q python/tests
"""

import json
import os
import re
import subprocess
import sys
import warnings
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import varuna
from varuna import models, testmodels
from varuna.export import EXTERNAL_DATA_THRESHOLD

RTOL = 1e-5
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALL = models.names()


def ort_loss(path, names, inputs):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {n: (t.numpy() if isinstance(t, torch.Tensor) else t) for n, t in zip(names, inputs)}
    return float(sess.run(["loss"], feeds)[0])


def torch_loss(model, inputs):
    with torch.no_grad():
        return float(model(*inputs))


def meta(proto):
    return {p.key: p.value for p in proto.metadata_props}


def assert_close(a, b, rtol=RTOL):
    assert abs(a - b) <= rtol * max(abs(b), 1e-12), (a, b)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Each zoo model exported once to ONNX (shared by several tests)."""
    d = tmp_path_factory.mktemp("onnx")
    out = {}
    for name in ALL:
        model, inputs, names = models.make(name)
        path = d / f"{name}.onnx"
        ret = varuna.export(model, inputs, path)
        assert ret == str(path)
        out[name] = (model, inputs, names, path)
    return out


# ---------------------------------------------------------------------------
# zoo
# ---------------------------------------------------------------------------

def test_names():
    assert ALL == ["gpt", "bert", "vit", "resnet", "convnext"]


@pytest.mark.parametrize("name", ALL)
def test_make_is_deterministic_and_returns_loss(name):
    m1, x1, n1 = models.make(name, seed=3)
    m2, x2, n2 = models.make(name, seed=3)
    assert n1 == n2 and len(n1) == len(x1)
    for a, b in zip(x1, x2):
        assert torch.equal(a, b)
    for (k1, p1), (k2, p2) in zip(m1.state_dict().items(), m2.state_dict().items()):
        assert k1 == k2 and torch.equal(p1, p2)
    assert all(t.shape[0] == 2 for t in x1)
    loss = m1(*x1)
    assert loss.dim() == 0 and loss.dtype == torch.float32 and torch.isfinite(loss)
    m3, _, _ = models.make(name, seed=4)
    assert any(not torch.equal(a, b) for a, b in zip(m1.parameters(), m3.parameters()))


def test_make_rejects_unknown():
    with pytest.raises(ValueError, match="unknown model"):
        models.make("nope")
    with pytest.raises(ValueError, match="unknown config key"):
        models.make("gpt", hiddn=8)


def test_make_does_not_touch_global_rng():
    state = torch.random.get_rng_state()
    models.make("gpt")
    assert torch.equal(state, torch.random.get_rng_state())


def test_gpt_tie_is_real():
    model, _, _ = models.make("gpt")
    assert model.lm_head.weight is model.wte.weight
    assert model.lm_head.bias is None
    names = [n for n, _ in model.named_parameters()]
    assert "wte.weight" in names and "lm_head.weight" not in names


def test_bert_tie_and_mask():
    model, (ids, mask, labels), names = models.make("bert")
    assert names == ["input_ids", "attention_mask", "labels"]
    assert model.decoder.weight is model.embeddings.word_embeddings.weight
    assert mask.dtype == torch.int64 and set(mask.unique().tolist()) <= {0, 1}
    assert (labels == -100).any() and (labels != -100).any()
    # The padding mask matters: changing padded tokens must not change the loss.
    ids2 = torch.where(mask == 0, (ids + 1) % model.cfg.vocab, ids)
    assert (ids2 != ids).any()
    assert_close(torch_loss(model, (ids2, mask, labels)), torch_loss(model, (ids, mask, labels)))


def test_gpt_trains_in_plain_pytorch():
    model, inputs, _ = models.make("gpt")
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = model(*inputs)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    assert losses[-1] < losses[0]
    # The tied weight received gradient from both the embedding and the head.
    model.zero_grad()
    model(*inputs).backward()
    g = model.wte.weight.grad
    unused = torch.ones(model.cfg.vocab, dtype=torch.bool)
    unused[inputs[0].unique()] = False
    assert g[unused].abs().sum() > 0  # only the lm_head reaches rows of unused tokens


def test_gpt_dropout_config():
    model, inputs, _ = models.make("gpt", dropout=0.1)
    torch.manual_seed(0)
    a = model(*inputs).item()
    b = model(*inputs).item()
    assert a != b
    model.eval()
    assert model(*inputs).item() == model(*inputs).item()


def test_gpt2_xl_shape_config():
    cfg = models.gpt2_xl_shape()
    assert (cfg.layers, cfg.hidden, cfg.heads, cfg.vocab, cfg.seq) == (48, 1600, 25, 50257, 1024)


def test_make_gpt2_xl_shape_small_override():
    m, (ids, labels), names = models.make_gpt2_xl_shape(layers=1, vocab=50, hidden=16, heads=2,
                                                        seq=8)
    assert names == ["input_ids", "labels"] and ids.shape == (1, 8)
    assert m.lm_head.weight is m.wte.weight
    assert not any(p.is_meta for p in m.parameters())
    mask = m.h[0].attn.causal_mask[0, 0]
    assert torch.equal(mask, torch.tril(torch.ones(8, 8, dtype=torch.bool)))
    assert torch.isfinite(m(ids, labels))
    m2, _, _ = models.make_gpt2_xl_shape(layers=1, vocab=50, hidden=16, heads=2, seq=8)
    assert torch.equal(m.wte.weight, m2.wte.weight)


# ---------------------------------------------------------------------------
# ONNX export of every zoo model
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL)
def test_onnx_matches_pytorch(exported, name):
    model, inputs, names, path = exported[name]
    onnx.checker.check_model(str(path))
    assert_close(ort_loss(path, names, inputs), torch_loss(model, inputs))


@pytest.mark.parametrize("name", ALL)
def test_onnx_batch_axis_is_dynamic(exported, name):
    model, _, names, path = exported[name]
    inputs3 = models.example_inputs(name, batch=3, seed=7)
    assert inputs3[0].shape[0] == 3
    assert_close(ort_loss(path, names, inputs3), torch_loss(model, inputs3))
    proto = onnx.load(str(path))
    assert [i.name for i in proto.graph.input] == names
    for i in proto.graph.input:
        assert i.type.tensor_type.shape.dim[0].dim_param == "batch"
    assert [o.name for o in proto.graph.output] == ["loss"]
    assert len(proto.graph.output[0].type.tensor_type.shape.dim) == 0


@pytest.mark.parametrize("name", ALL)
def test_onnx_metadata_and_parameter_names(exported, name):
    model, _, _, path = exported[name]
    proto = onnx.load(str(path))
    md = meta(proto)
    params = [n for n, _ in model.named_parameters()]
    buffers = [n for n, _ in model.named_buffers()]
    assert json.loads(md["varuna.parameters"]) == params
    assert json.loads(md["varuna.buffers"]) == buffers
    assert md["varuna.batch_dim"] == "0"
    assert md["varuna.exporter"] == f"varuna.export torch {torch.__version__}"
    assert md["varuna.training"] == "1"
    # Every trainable parameter is an initializer under its own module name.
    inits = {t.name for t in proto.graph.initializer}
    assert set(params) <= inits, set(params) - inits
    # Training-mode export: no value-based de-duplication, no Identity aliases.
    assert not any(n.op_type == "Identity" for n in proto.graph.node)
    assert not any(i.startswith("onnx::") for i in inits)
    assert proto.opset_import[0].version == 17


def test_frozen_parameters_and_embedding_padding_metadata(tmp_path):
    # A parameter that does not require grad is frozen state, not trained;
    # an nn.Embedding's padding_idx is recorded under every name of its
    # (tied) weight, since the ONNX Gather does not keep it.
    model, inputs, _ = models.make("gpt")
    model.wpe.weight.requires_grad_(False)
    model.wte.padding_idx = 3
    varuna.export(model, inputs, tmp_path / "g.onnx")
    md = meta(onnx.load(str(tmp_path / "g.onnx")))
    params = json.loads(md["varuna.parameters"])
    assert "wpe.weight" not in params and "wte.weight" in params
    assert json.loads(md["varuna.buffers"])[0] == "wpe.weight"
    assert json.loads(md["varuna.embedding_padding"]) == {"wte.weight": 3, "lm_head.weight": 3}
    varuna.export(model, inputs, tmp_path / "g.pt")
    with zipfile.ZipFile(tmp_path / "g.pt") as z:
        info = json.loads(z.read(next(n for n in z.namelist() if n.endswith("varuna.json"))))
    assert "wpe.weight" not in info["parameters"] and "wpe.weight" in info["buffers"]


class _UnusedLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(4, 3)
        self.unused = nn.Linear(4, 2).to(torch.bfloat16)  # whose output the loss drops

    def forward(self, x, y):
        self.unused(x.to(torch.bfloat16))
        return F.cross_entropy(self.used(x), y)


def test_unused_parameters_kept_as_initializers(tmp_path):
    # torch's exporter drops parameters no node reads; varuna.export adds
    # them back with their values, so that the job holds (and keeps
    # unchanged, as torch's optimizers would) every parameter.
    torch.manual_seed(0)
    model = _UnusedLayer()
    varuna.export(model, (torch.randn(2, 4), torch.tensor([0, 2])), tmp_path / "u.onnx")
    proto = onnx.load(str(tmp_path / "u.onnx"))
    inits = {t.name: t for t in proto.graph.initializer}
    assert {"unused.weight", "unused.bias", "used.weight", "used.bias"} <= set(inits)
    w = inits["unused.weight"]
    assert w.data_type == onnx.TensorProto.BFLOAT16 and list(w.dims) == [2, 4]
    got = torch.frombuffer(bytearray(w.raw_data), dtype=torch.bfloat16).reshape(2, 4)
    assert torch.equal(got, model.unused.weight.detach())


class _Reverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -g


class _Square(torch.autograd.Function):  # backward = the forward's derivative
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class _CustomBackward(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fc, self.fn = nn.Linear(4, 3), fn

    def forward(self, x, y):
        return F.cross_entropy(self.fn.apply(self.fc(x)), y)


@pytest.mark.parametrize("suffix", [".onnx", ".pt"])
def test_custom_autograd_function_refused(tmp_path, suffix):
    # A Python backward cannot be exported: torch's ONNX exporter keeps the
    # forward's ops, whose gradient is not a gradient reversal's (it was
    # silently trained as the identity); TorchScript holds no Python.
    x, y = torch.randn(2, 4), torch.tensor([0, 2])
    with pytest.raises(ValueError, match=r"custom autograd.Function .*_Reverse.*: its backward"):
        varuna.export(_CustomBackward(_Reverse), (x, y), tmp_path / ("m" + suffix))
    assert not os.path.exists(tmp_path / ("m" + suffix))
    square = _CustomBackward(_Square)
    if suffix == ".pt":
        with pytest.raises(ValueError, match=r"_Square: its backward is Python code"):
            varuna.export(square, (x, y), tmp_path / "s.pt")
    else:  # the forward's derivative is the backward: the ONNX file trains alike
        with warnings.catch_warnings():  # nor is its no_grad forward a gradient cut
            warnings.simplefilter("error")
            varuna.export(square, (x, y), tmp_path / "s.onnx")
        assert "fc.weight" in {t.name for t in onnx.load(str(tmp_path / "s.onnx")).graph.initializer}


class _Quantile(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, y):
        h = self.fc(x)
        return F.cross_entropy(h - torch.quantile(h, 0.5, dim=1, keepdim=True), y)


def test_onnx_unsupported_operator_points_to_torchscript(tmp_path):
    # torch's ONNX exporter cannot export aten::quantile (nor kron, cummax,
    # nanmean, rot90, ...); the error says what to do, and the TorchScript
    # export of the same model works (test/Train/user-statistics.test trains
    # such models).
    x, y = torch.randn(2, 4), torch.tensor([0, 2])
    with pytest.raises(ValueError, match=r"aten::quantile.*Export to TorchScript instead"):
        varuna.export(_Quantile(), (x, y), tmp_path / "q.onnx")
    assert not os.path.exists(tmp_path / "q.onnx")
    varuna.export(_Quantile(), (x, y), tmp_path / "q.pt")
    assert os.path.exists(tmp_path / "q.pt")


class _Checkpointed(nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        self.reentrant = reentrant
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 4))
                                    for _ in range(2))
        self.head = nn.Linear(4, 3)

    def forward(self, x, y):
        from torch.utils.checkpoint import checkpoint
        for b in self.blocks:
            x = x + checkpoint(b, x, use_reentrant=self.reentrant)
        return F.cross_entropy(self.head(x), y)


@pytest.mark.parametrize("suffix", [".onnx", ".pt"])
@pytest.mark.parametrize("reentrant", [False, True])
def test_activation_checkpointing_exports(tmp_path, suffix, reentrant):
    # torch.utils.checkpoint runs its function directly while exporting (the
    # tracer fails inside torch on the reentrant form, and the other is an
    # autograd.Function): the file holds the blocks' ops. Reentrant
    # checkpointing of the first block, whose input needs no gradient, gives
    # its parameters none in PyTorch: varuna trains them, and says so.
    torch.manual_seed(0)
    model = _Checkpointed(reentrant)
    x, y = torch.randn(2, 4), torch.tensor([0, 2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        varuna.export(model, (x, y), tmp_path / ("m" + suffix))
    said = [str(w.message) for w in caught if "use_reentrant=True" in str(w.message)]
    assert bool(said) == reentrant, said
    if reentrant:
        assert "Sequential gets no input that requires gradients" in said[0]
    if suffix == ".pt":
        loaded = torch.jit.load(str(tmp_path / "m.pt"))
        assert torch.allclose(loaded(x, y), model(x, y))
        graph = str(loaded.inlined_graph)
        assert "PythonOp" not in graph and "aten::gelu" in graph
    else:
        session = ort.InferenceSession(str(tmp_path / "m.onnx"))
        (loss,) = session.run(None, {"x": x.numpy(), "y": y.numpy()})
        assert abs(float(loss) - model(x, y).item()) < 1e-6


def test_compiled_module_exports_its_module(tmp_path):
    # torch.compile(model) wraps forward as forward(*args, **kwargs): the
    # export reads the original module (names, parameters) instead.
    torch.manual_seed(0)
    model = _Quantile()
    x, y = torch.randn(2, 4), torch.tensor([0, 2])
    varuna.export(torch.compile(model), (x, y), tmp_path / "c.pt")
    loaded = torch.jit.load(str(tmp_path / "c.pt"))
    assert torch.allclose(loaded(x, y), model(x, y))
    info = json.loads(zipfile.ZipFile(tmp_path / "c.pt").read("c/extra/varuna.json"))
    assert [i["name"] for i in info["inputs"]] == ["x", "y"]
    assert info["parameters"] == ["fc.weight", "fc.bias"]


@pytest.mark.parametrize("suffix", [".onnx", ".pt"])
def test_hugging_face_model_with_a_dict_batch(tmp_path, suffix):
    # A Hugging Face model as it is, called as model(**batch), returning a
    # ModelOutput: the dict's keys name the inputs, the output's "loss" is
    # the loss, the parameters keep the model's own names, and the model's
    # mode is left as it was.
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=50, n_embd=16, n_layer=1, n_head=2, n_positions=16, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager"))
    model.eval()
    ids = torch.randint(0, 50, (2, 8))
    batch = {"input_ids": ids, "labels": ids.clone()}
    path = varuna.export(model, batch, tmp_path / ("m" + suffix))
    assert not model.training
    want = model(**batch).loss.item()
    if suffix == ".pt":
        info = json.loads(zipfile.ZipFile(path).read("m/extra/varuna.json"))
        assert [i["name"] for i in info["inputs"]] == ["input_ids", "labels"]
        assert "transformer.wte.weight" in info["parameters"]
        got = torch.jit.load(path)(ids, ids.clone()).item()
    else:
        m = onnx.load(str(path))
        assert [i.name for i in m.graph.input] == ["input_ids", "labels"]
        assert "transformer.wte.weight" in {t.name for t in m.graph.initializer}
        (got,) = ort.InferenceSession(path).run(None, {"input_ids": ids.numpy(),
                                                       "labels": ids.numpy()})
    assert abs(float(got) - want) < 1e-5 * want
    with pytest.raises(ValueError, match=r"mapping without a 'loss' tensor"):
        varuna.export(model, {"input_ids": ids}, tmp_path / ("n" + suffix))


class _Autocast(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = self.fc(x)
        return F.cross_entropy(h.float(), y)


def test_autocast_in_forward_warned(tmp_path):
    # The tracer records the ops but not autocast's casts: the file computes
    # in float32. The warning points at the training config's precision.
    x, y = torch.randn(2, 4), torch.tensor([0, 2])
    with pytest.warns(UserWarning, match=r"torch.autocast .*\"precision\": \"bf16\""):
        varuna.export(_Autocast(), (x, y), tmp_path / "a.pt")
    with warnings.catch_warnings():  # autocast around the export is not the model's:
        # exported without it (the tracer cannot record it either)
        warnings.simplefilter("error")
        with torch.autocast("cpu", dtype=torch.bfloat16):
            varuna.export(_Quantile(), (x, y), tmp_path / "b.pt")


class _SizeAsIgnoreIndex(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, y):  # as DistilBERT's question answering does
        h = self.fc(x)
        return F.cross_entropy(h, y.clamp(0, h.size(1)), ignore_index=h.size(1))


def test_onnx_exporter_failure_points_to_torchscript(tmp_path):
    # torch's exporter raises a TypeError on an ignore_index read from a
    # size; the model ran, so the error says the exporter failed and what to
    # do instead, and TorchScript takes the model.
    x, y = torch.randn(2, 4), torch.tensor([0, 2])
    with pytest.raises(ValueError, match=r"torch's ONNX exporter failed on this model "
                                         r"\(TypeError: .*Export to TorchScript instead"):
        varuna.export(_SizeAsIgnoreIndex(), (x, y), tmp_path / "s.onnx")
    assert not os.path.exists(tmp_path / "s.onnx")
    varuna.export(_SizeAsIgnoreIndex(), (x, y), tmp_path / "s.pt")


class _LayerDrop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))
        self.head = nn.Linear(4, 3)

    def forward(self, x, y):
        for layer in self.layers:
            if self.training and torch.rand([]) < 0.5:  # LayerDrop
                continue
            x = layer(x)
        return F.cross_entropy(self.head(x), y)


@pytest.mark.parametrize("suffix", [".onnx", ".pt"])
def test_python_branch_on_a_tensor_warned(tmp_path, suffix):
    # The tracer keeps the branch the example took (torch's TracerWarning
    # says "might cause the trace to be incorrect"): varuna.export says what
    # it means for training, naming the place.
    x, y = torch.randn(2, 4), torch.tensor([0, 2])
    with pytest.warns(UserWarning, match=r"branches in Python on a tensor's value "
                                         r"\(1 place\(s\): .*test_export.py:[0-9]+\)"):
        varuna.export(_LayerDrop(), (x, y), tmp_path / ("m" + suffix))


class _ConfigLayerDrop(nn.Module):
    # Hugging Face's form: the probability is an attribute (BART, M2M100,
    # wav2vec2: encoder_layerdrop / decoder_layerdrop / layerdrop).
    def __init__(self):
        super().__init__()
        self.layerdrop = 0.5
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))
        self.head = nn.Linear(4, 3)

    def forward(self, x, y):
        for layer in self.layers:
            if self.training and torch.rand([]) < self.layerdrop:
                continue
            x = layer(x)
        return F.cross_entropy(self.head(x), y)


def test_layerdrop_attribute_exported_as_zero(tmp_path):
    # A traced draw would drop layers for good; the export runs every layer
    # (LayerDrop 0), says so, and leaves the attribute as it was. (With this
    # seed the traced draw dropped layer 0 before.)
    torch.manual_seed(2)
    model = _ConfigLayerDrop()
    x, y = torch.randn(2, 4), torch.tensor([0, 2])
    with pytest.warns(UserWarning, match=r"LayerDrop \(_ConfigLayerDrop.layerdrop = 0.5\) "
                                         r"skips whole layers at random"):
        varuna.export(model, (x, y), tmp_path / "m.onnx")
    assert model.layerdrop == 0.5 and model.training
    _assert_onnx_is_eval_mode(tmp_path / "m.onnx", model, (x, y))  # every layer


def _assert_onnx_is_eval_mode(path, model, inputs):
    """The exported file's loss (onnxruntime) is the model's in eval mode:
    no random draw was frozen into it."""
    model.eval()
    want = model(*inputs).item()
    sess = ort.InferenceSession(str(path))
    got = sess.run(None, {i.name: v.numpy() for i, v in zip(sess.get_inputs(), inputs)})[0]
    assert abs(float(got) - want) <= 1e-6 * max(1.0, abs(want))


class _SpecAugment(nn.Module):
    # wav2vec2 / HuBERT / WavLM: time steps masked with numpy's draw while
    # training (config.mask_time_prob).
    def __init__(self):
        super().__init__()
        import types
        self.config = types.SimpleNamespace(mask_time_prob=0.5, hidden_size=4)
        self.masked = nn.Parameter(torch.zeros(4))
        self.head = nn.Linear(4, 3)

    def forward(self, x, y):
        if self.training and self.config.mask_time_prob > 0:
            mask = torch.from_numpy(np.random.rand(*x.shape[:2]) < self.config.mask_time_prob)
            x = torch.where(mask[..., None], self.masked, x)
        return F.cross_entropy(self.head(x).mean(1), y)


def test_specaugment_exported_without_masks(tmp_path):
    x, y = torch.randn(2, 5, 4), torch.tensor([0, 2])
    model = _SpecAugment()
    with pytest.warns(UserWarning, match=r"SpecAugment \(config.mask_time_prob = 0.5\) masks "
                                         r"time steps and features at random"):
        varuna.export(model, (x, y), tmp_path / "m.onnx")
    assert model.config.mask_time_prob == 0.5
    _assert_onnx_is_eval_mode(tmp_path / "m.onnx", model, (x, y))  # no masks


class _UnfoldNegativeDim(nn.Module):
    # PatchTST's patchifier: unfold along dim -2. torch's ONNX exporter
    # concatenates the windows along the wrong axis for a negative dim.
    def __init__(self):
        super().__init__()
        self.pos = nn.Parameter(torch.zeros(4, 3, 8))

    def forward(self, x, y):
        return F.mse_loss(x.unfold(-2, 8, 8) + self.pos, y)


def test_onnx_the_exporter_got_wrong_is_warned(tmp_path):
    x, y = torch.randn(2, 32, 3), torch.randn(2, 4, 3, 8)
    with pytest.warns(UserWarning, match=r"torch's ONNX exporter wrote a graph that onnx's "
                                         r"shape inference rejects .*Incompatible dimensions"):
        varuna.export(_UnfoldNegativeDim(), (x, y), tmp_path / "m.onnx")
    varuna.export(_UnfoldNegativeDim(), (x, y), tmp_path / "m.pt")  # TorchScript: fine


class _Float64Gelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(6, 8), nn.Linear(8, 1)

    def forward(self, x, y):
        return F.mse_loss(self.b(F.gelu(self.a(x))).squeeze(-1), y)


def test_onnx_kernel_onnxruntime_lacks_is_not_blamed_on_the_export(tmp_path):
    # onnxruntime has no float64 Erf: the graph is valid (it compiles and
    # trains exactly), so the warning says the check could not run, not that
    # "the export is at fault, and varuna-compile will refuse or mistrain it".
    pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    x, y = torch.randn(4, 6, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        varuna.export(_Float64Gelu().double(), (x, y), tmp_path / "m.onnx")
    texts = [str(w.message) for w in caught]
    assert any("onnxruntime has no kernel for an op of the exported graph" in t
               for t in texts), texts
    assert not any("the export is at fault" in t for t in texts), texts


def test_onnx_onnxruntime_cannot_run_is_warned(tmp_path):
    # Cohere's interleaved rotary embedding: torch's exporter writes a graph
    # whose Mul cannot broadcast (8 against 16), behind a Shape -> Reshape
    # chain that onnx's shape inference does not follow; onnxruntime
    # refuses to run it.
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "CohereConfig"):
        pytest.skip("this transformers has no Cohere")
    torch.manual_seed(0)
    cfg = transformers.CohereConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1,
                                    num_attention_heads=2, intermediate_size=64,
                                    max_position_embeddings=64, pad_token_id=0)
    model = transformers.CohereForCausalLM(cfg)
    ids = torch.randint(0, 100, (2, 16))
    batch = {"input_ids": ids, "labels": ids.clone()}
    with pytest.warns(UserWarning, match=r"torch's ONNX exporter wrote a graph onnxruntime "
                                         r"cannot run \(.*Mul.*\): the model ran in PyTorch"):
        varuna.export(model, batch, tmp_path / "m.onnx")


class _Bags(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(20, 4, mode="mean")

    def forward(self, ids):
        return self.bag(ids).square().mean()


def test_onnx_embedding_bag_loop_is_warned(tmp_path):
    # torch's exporter writes nn.EmbeddingBag as a Loop over the bags, which
    # varuna-compile does not import (onnxruntime runs it: no other check
    # sees it); TorchScript keeps embedding_bag.
    ids = torch.randint(0, 20, (2, 5))
    with pytest.warns(UserWarning, match=r"torch's ONNX exporter wrote 1 loop\(s\) \(.*Loop; "
                                         r"it writes nn.EmbeddingBag as a loop over its bags\)"):
        varuna.export(_Bags(), (ids,), tmp_path / "m.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        varuna.export(_Bags(), (ids,), tmp_path / "m.pt")


def test_onnx_loss_onnxruntime_disagrees_with_is_warned(tmp_path, recwarn):
    # The check itself: a file that runs but computes another loss than the
    # model's forward (no exporter bug at hand does this, so the forward's
    # loss is given wrong), and one without random draws that agrees.
    from varuna.export import _check_onnx_runs
    torch.manual_seed(0)
    lin = nn.Sequential(nn.Linear(3, 4), nn.Tanh())

    class Loss(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = lin

        def forward(self, x):
            return self.net(x).square().mean()

    x = torch.randn(2, 3)
    varuna.export(Loss(), (x,), tmp_path / "m.onnx")
    assert not [w for w in recwarn if "onnxruntime" in str(w.message)]
    loss = float(Loss()(x))
    _check_onnx_runs(str(tmp_path / "m.onnx"), onnx.load(tmp_path / "m.onnx"), (x,), ["x"], loss, 0)
    assert not [w for w in recwarn if "onnxruntime" in str(w.message)]
    with pytest.warns(UserWarning, match=r"computes a loss of .* \(onnxruntime\), where the "
                                         r"model's forward computed"):
        _check_onnx_runs(str(tmp_path / "m.onnx"), onnx.load(tmp_path / "m.onnx"), (x,), ["x"], loss + 1.0, 0)


class _HookedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, y):
        h = self.fc(x)
        h.register_hook(lambda g: g.clamp(-0.1, 0.1))
        return F.cross_entropy(h, y)


@pytest.mark.parametrize("where", ["parameter", "module", "forward"])
def test_gradient_hooks_warned(tmp_path, where):
    # The exported graph has no hooks: a hook that clips or scales a
    # gradient would silently not apply.
    torch.manual_seed(0)
    x, y = torch.randn(2, 4), torch.tensor([0, 2])
    model = _HookedForward() if where == "forward" else _UnusedLayer()
    if where == "parameter":
        model.used.weight.register_hook(lambda g: g * 0.5)
    elif where == "module":
        model.used.register_full_backward_hook(lambda m, gi, go: None)
    expect = {"parameter": "parameter 'used.weight'", "module": "module 'used'",
              "forward": "a tensor of the forward"}[where]
    # (torch.jit.trace refuses a module with backward hooks itself.)
    path = tmp_path / ("h.onnx" if where == "module" else "h.pt")
    with pytest.warns(UserWarning, match=f"gradient hooks are registered on {expect}"):
        varuna.export(model, (x, y), path)


def test_noncontiguous_parameter_saved_contiguous(tmp_path):
    # A Q from torch.linalg.qr is column-major (Glow's initial 1x1
    # convolution weight); the TorchScript file stores it row-major, which
    # varuna-compile reads in place, and the model keeps its own layout.
    torch.manual_seed(0)
    model = _UnusedLayer()
    q = torch.linalg.qr(torch.randn(4, 4))[0][:3]  # [3, 4], not contiguous
    assert not q.is_contiguous()
    model.used.weight = nn.Parameter(q)
    varuna.export(model, (torch.randn(2, 4), torch.tensor([0, 2])), tmp_path / "q.pt")
    assert not model.used.weight.is_contiguous()
    loaded = torch.jit.load(str(tmp_path / "q.pt"))
    w = dict(loaded.named_parameters())["used.weight"]
    assert w.is_contiguous() and torch.equal(w, q)
    # (varuna-compile of such a model: test/Train/user-linalg.test, glow.)


def test_export_restores_buffers_and_stores_pre_export_values(tmp_path):
    model, inputs, _ = models.make("resnet")
    before = {n: b.clone() for n, b in model.named_buffers()}
    varuna.export(model, inputs, tmp_path / "r.onnx")
    varuna.export(model, inputs, tmp_path / "r.pt")
    for n, b in model.named_buffers():
        assert torch.equal(b, before[n]), n
    proto = onnx.load(str(tmp_path / "r.onnx"))
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in proto.graph.initializer}
    assert np.array_equal(inits["bn1.running_mean"], before["bn1.running_mean"].numpy())
    assert np.array_equal(inits["bn1.running_var"], before["bn1.running_var"].numpy())
    ts = torch.jit.load(str(tmp_path / "r.pt"))
    assert torch.equal(ts.bn1.running_mean, before["bn1.running_mean"])
    assert int(ts.bn1.num_batches_tracked) == 0


def test_export_does_not_advance_rng_or_change_mode(tmp_path):
    model, inputs, _ = models.make("gpt", dropout=0.1)
    model.eval()
    state = torch.random.get_rng_state()
    model.h[0].train()  # mixed modes are restored module by module
    varuna.export(model, inputs, tmp_path / "g.onnx")
    varuna.export(model, inputs, tmp_path / "g.pt")
    assert torch.equal(state, torch.random.get_rng_state())
    assert not model.training and model.h[0].training and model.h[0].attn.training
    assert not model.h[1].training


def test_gpt_tied_weight_single_initializer_two_consumers(exported):
    model, _, _, path = exported["gpt"]
    assert model.lm_head.weight is model.wte.weight
    proto = onnx.load(str(path))
    names = [t.name for t in proto.graph.initializer]
    assert names.count("wte.weight") == 1
    assert "lm_head.weight" not in names
    consumers = {}
    for n in proto.graph.node:
        for x in n.input:
            consumers.setdefault(x, []).append(n)
    final = []  # consumers of wte.weight, looking through Transpose
    for n in consumers["wte.weight"]:
        if n.op_type == "Transpose":
            final += [(m.op_type, m.name) for m in consumers[n.output[0]]]
        else:
            final.append((n.op_type, n.name))
    assert len(set(final)) == 2, final
    assert {op for op, _ in final} == {"Gather", "MatMul"}


def test_dropout_in_training_export(tmp_path):
    model, inputs, names = models.make("gpt", dropout=0.25)
    path = tmp_path / "d.onnx"
    varuna.export(model, inputs, path)
    proto = onnx.load(str(path))
    consts = {n.output[0]: onnx.numpy_helper.to_array(n.attribute[0].t)
              for n in proto.graph.node if n.op_type == "Constant"}
    drops = [n for n in proto.graph.node if n.op_type == "Dropout"]
    assert drops
    for d in drops:
        assert float(consts[d.input[1]]) == pytest.approx(0.25)
        assert bool(consts[d.input[2]]) is True  # training_mode
    loss = ort_loss(path, names, inputs)
    assert np.isfinite(loss)


# ---------------------------------------------------------------------------
# external data
# ---------------------------------------------------------------------------

def test_external_data_forced(tmp_path):
    model, inputs, names = models.make("gpt")
    path = tmp_path / "ext.onnx"
    varuna.export(model, inputs, path, external_data=True)
    data = tmp_path / "ext.onnx.data"
    assert data.exists()
    proto = onnx.load(str(path), load_external_data=False)
    total = 0
    for t in proto.graph.initializer:
        assert t.data_location == onnx.TensorProto.EXTERNAL
        info = {e.key: e.value for e in t.external_data}
        assert info["location"] == "ext.onnx.data"
        assert int(info["offset"]) % 64 == 0
        total = max(total, int(info["offset"]) + int(info["length"]))
    assert total == data.stat().st_size
    assert os.path.getsize(path) < 64 * 1024
    onnx.checker.check_model(str(path))
    assert_close(ort_loss(path, names, inputs), torch_loss(model, inputs))
    # onnx.load resolves the data and gets the same values as the model.
    full = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}
    assert np.array_equal(full["wte.weight"], model.wte.weight.detach().numpy())
    assert json.loads(meta(proto)["varuna.parameters"])[0] == "wte.weight"
    # Re-exporting embedded removes the now-stale data file.
    varuna.export(model, inputs, path, external_data=False)
    assert not data.exists()
    assert_close(ort_loss(path, names, inputs), torch_loss(model, inputs))
    # No temp files are left behind.
    assert sorted(os.listdir(tmp_path)) == ["ext.onnx"]


def test_external_data_auto_threshold(tmp_path, monkeypatch):
    import varuna.export as _  # noqa: F401  (module is shadowed by the function)
    mod = __import__("sys").modules["varuna.export"]
    assert mod.EXTERNAL_DATA_THRESHOLD == EXTERNAL_DATA_THRESHOLD == 1 << 30
    model, inputs, names = models.make("convnext")
    varuna.export(model, inputs, tmp_path / "small.onnx")
    assert not (tmp_path / "small.onnx.data").exists()
    monkeypatch.setattr(mod, "EXTERNAL_DATA_THRESHOLD", 1000)
    varuna.export(model, inputs, tmp_path / "big.onnx")
    assert (tmp_path / "big.onnx.data").exists()
    assert_close(ort_loss(tmp_path / "big.onnx", names, inputs), torch_loss(model, inputs))


# ---------------------------------------------------------------------------
# TorchScript
# ---------------------------------------------------------------------------

def _ts_info(path):
    extra = {"varuna.json": ""}
    mod = torch.jit.load(str(path), _extra_files=extra)
    return mod, json.loads(extra["varuna.json"])


@pytest.mark.parametrize("name", ["gpt", "resnet"])
def test_torchscript_roundtrip(tmp_path, name):
    model, inputs, names = models.make(name)
    path = tmp_path / f"{name}.pt"
    varuna.export(model, inputs, path)  # format inferred from .pt
    assert zipfile.is_zipfile(path)
    mod, info = _ts_info(path)
    assert_close(torch_loss(mod, inputs), torch_loss(model, inputs), rtol=1e-6)
    inputs3 = models.example_inputs(name, batch=3, seed=5)
    assert_close(torch_loss(mod, inputs3), torch_loss(model, inputs3))
    assert info["loss"] == "loss"
    assert info["parameters"] == [n for n, _ in model.named_parameters()]
    assert info["buffers"] == [n for n, _ in model.named_buffers()]
    assert info["exporter"].startswith("varuna.export torch ")
    assert [i["name"] for i in info["inputs"]] == names
    for i, t in zip(info["inputs"], inputs):
        assert i["shape"] == list(t.shape)
        assert i["dtype"] == str(t.dtype).replace("torch.", "")
        assert i["batch_dim"] == 0
    if name == "gpt":
        assert info["inputs"][0]["dtype"] == "int64"
        # The tie survives serialization.
        assert mod.lm_head.weight.data_ptr() == mod.wte.weight.data_ptr()
    else:
        assert info["inputs"][0]["dtype"] == "float32"


def test_torchscript_explicit_format_pth_suffix(tmp_path):
    # .pth is the other suffix every varuna tool reads as TorchScript (a
    # suffix they do not read, such as .bin, is refused:
    # test_error_path_suffix_varuna_compile_would_misread).
    model, inputs, _ = models.make("gpt")
    path = tmp_path / "model.pth"
    varuna.export(model, inputs, path, format="torchscript", input_names=["ids", "tgt"],
                  loss_name="nll")
    _, info = _ts_info(path)
    assert [i["name"] for i in info["inputs"]] == ["ids", "tgt"] and info["loss"] == "nll"


# ---------------------------------------------------------------------------
# arguments
# ---------------------------------------------------------------------------

class Pair(nn.Module):
    def __init__(self, out="loss"):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.out = out

    def forward(self, x, y):
        logits = self.lin(x)
        loss = F.cross_entropy(logits, y)
        if self.out == "tuple":
            return loss, logits
        if self.out == "logits":
            return logits
        if self.out == "int":
            return y.sum()
        if self.out == "list":
            return [1.0]
        return loss


def pair_inputs(b=2):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 4, generator=g), torch.randint(0, 3, (b,), generator=g)


def test_default_input_names_from_signature(tmp_path):
    path = tmp_path / "p.onnx"
    varuna.export(Pair(), pair_inputs(), path)
    proto = onnx.load(str(path))
    assert [i.name for i in proto.graph.input] == ["x", "y"]
    assert [o.name for o in proto.graph.output] == ["loss"]


def test_tuple_output_and_custom_names(tmp_path):
    m, inputs = Pair("tuple"), pair_inputs()
    path = tmp_path / "p.onnx"
    varuna.export(m, inputs, path, input_names=["feat", "target"], loss_name="objective")
    proto = onnx.load(str(path))
    assert [i.name for i in proto.graph.input] == ["feat", "target"]
    assert proto.graph.output[0].name == "objective"
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = sess.run(["objective"], {"feat": inputs[0].numpy(), "target": inputs[1].numpy()})[0]
    assert_close(float(out), float(m(*inputs)[0].detach()))


def test_single_tensor_example_input(tmp_path):
    class One(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(4))

        def forward(self, x):
            return (x * self.w).pow(2).mean()

    path = tmp_path / "one.onnx"
    varuna.export(One(), torch.randn(2, 4), path)
    assert json.loads(meta(onnx.load(str(path)))["varuna.parameters"]) == ["w"]


def test_batch_dim_other_than_zero(tmp_path):
    class SeqFirst(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 1)

        def forward(self, x):  # x: [T, B, 4]
            return self.lin(x).pow(2).mean()

    m = SeqFirst()
    path = tmp_path / "s.onnx"
    x = torch.randn(5, 2, 4)
    varuna.export(m, (x,), path, batch_dim=1)
    proto = onnx.load(str(path))
    assert meta(proto)["varuna.batch_dim"] == "1"
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_value == 5 and dims[1].dim_param == "batch"
    x3 = torch.randn(5, 3, 4)
    assert_close(ort_loss_named(path, {"x": x3.numpy()}), float(m(x3).detach()))


def ort_loss_named(path, feeds):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return float(sess.run(["loss"], feeds)[0])


@pytest.mark.parametrize("out,match", [
    ("logits", r"scalar floating-point loss.*shape \[2, 3\]"),
    ("int", r"scalar floating-point loss.*dtype int64"),
    ("list", r"loss tensor .*got float"),
])
def test_error_not_a_scalar_loss(tmp_path, out, match):
    with pytest.raises(ValueError, match=match):
        varuna.export(Pair(out), pair_inputs(), tmp_path / "p.onnx")
    assert not os.listdir(tmp_path)


def test_error_input_names_length(tmp_path):
    with pytest.raises(ValueError, match=r"input_names has 1 name\(s\) \['x'\] but there are 2"):
        varuna.export(Pair(), pair_inputs(), tmp_path / "p.onnx", input_names=["x"])


def test_error_unknown_format(tmp_path):
    with pytest.raises(ValueError, match=r"unknown export format 'tflite'"):
        varuna.export(Pair(), pair_inputs(), tmp_path / "p.onnx", format="tflite")


def test_error_input_without_batch_dim(tmp_path):
    with pytest.raises(ValueError, match=r"'y' has shape \[2\] \(1 dims\).*batch_dim=1"):
        varuna.export(Pair(), pair_inputs(), tmp_path / "p.onnx", batch_dim=1)
    x, y = pair_inputs()
    with pytest.raises(ValueError, match=r"'x' has shape \[\] \(0 dims\)"):
        varuna.export(Pair(), (torch.tensor(1.0), y), tmp_path / "p.onnx")


def test_error_misc_arguments(tmp_path):
    x, y = pair_inputs()
    with pytest.raises(ValueError, match="disagree on the batch size"):
        varuna.export(Pair(), (x, y[:1]), tmp_path / "p.onnx")
    with pytest.raises(ValueError, match=r"example_inputs\[1\] is a int"):
        varuna.export(Pair(), (x, 3), tmp_path / "p.onnx")
    with pytest.raises(ValueError, match="duplicate input name"):
        varuna.export(Pair(), (x, y), tmp_path / "p.onnx", input_names=["a", "a"])
    with pytest.raises(ValueError, match="collides with an input name"):
        varuna.export(Pair(), (x, y), tmp_path / "p.onnx", loss_name="x")
    with pytest.raises(ValueError, match="batch_dim must be a non-negative int"):
        varuna.export(Pair(), (x, y), tmp_path / "p.onnx", batch_dim=-1)
    with pytest.raises(ValueError, match="pass input_names"):
        varuna.export(Pair(), (x, y, x), tmp_path / "p.onnx")
    with pytest.raises(ValueError, match="external_data applies to ONNX"):
        varuna.export(Pair(), (x, y), tmp_path / "p.pt", external_data=True)
    with pytest.raises(ValueError, match="torch.nn.Module"):
        varuna.export(lambda a, b: a, (x, y), tmp_path / "p.onnx")
    assert not os.listdir(tmp_path)


def test_batch_size_one_warns(tmp_path):
    x, y = pair_inputs(1)
    with pytest.warns(UserWarning, match="batch size is 1"):
        varuna.export(Pair(), (x, y), tmp_path / "p.onnx")


class Detaching(torch.nn.Module):
    """A distillation-style loss: the target is a detached second head."""

    def __init__(self, detach_input_only=False, how="detach"):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
        self.detach_input_only, self.how = detach_input_only, how

    def forward(self, x, y):
        if self.detach_input_only:  # the input needs no gradient: harmless
            x = x.detach()
            return torch.nn.functional.mse_loss(self.a(x), self.b(x))
        if self.how == "no_grad":
            with torch.no_grad():
                t = self.b(x)
        elif self.how == "data":
            t = self.b(x).data
        else:
            t = self.b(x).detach()
        return torch.nn.functional.mse_loss(self.a(x), t)


def test_onnx_export_warns_about_detach(tmp_path):
    x, y = torch.randn(2, 4), torch.randn(2, 3)
    with pytest.warns(UserWarning, match=r"detaches a value that needs gradients \(1 time\(s\), "
                      r"first at .*test_export.py:\d+\): torch's ONNX exporter drops detach"):
        varuna.export(Detaching(), (x, y), tmp_path / "d.onnx", input_names=["x", "y"])
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither of these warns
        varuna.export(Detaching(detach_input_only=True), (x, y), tmp_path / "i.onnx",
                      input_names=["x", "y"])
        varuna.export(Detaching(), (x, y), tmp_path / "d.pt", input_names=["x", "y"])


@pytest.mark.parametrize("suffix", ["pt", "onnx"])
def test_export_warns_about_lost_gradient_cuts(tmp_path, suffix):
    # Neither format keeps torch.no_grad() or .data: the trace records the
    # first as ordinary ops and the second as a constant.
    x, y = torch.randn(2, 4), torch.randn(2, 3)
    with pytest.warns(UserWarning, match=r"computes under torch.no_grad\(\) from values that "
                      r"need gradients \(first at .*test_export.py:\d+\)"):
        varuna.export(Detaching(how="no_grad"), (x, y), tmp_path / f"n.{suffix}",
                      input_names=["x", "y"])
    with pytest.warns(UserWarning, match=r"reads .data of a value that needs gradients"):
        varuna.export(Detaching(how="data"), (x, y), tmp_path / f"d.{suffix}",
                      input_names=["x", "y"])


# ---------------------------------------------------------------------------
# testmodels CLI
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def testmodel_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("testmodels")
    assert testmodels.main([str(d), "-q"]) == 0
    return d


def test_testmodels_files(testmodel_dir):
    files = set(os.listdir(testmodel_dir))
    for name in ALL:
        assert {f"{name}.onnx", f"{name}.inputs.npz", f"{name}.expected.json"} <= files
    assert {"gpt.pt", "resnet.pt"} <= files
    assert not {"bert.pt", "vit.pt", "convnext.pt"} & files
    for v in ["gpt_static", "gpt_eval", "gpt_external", "gpt_opset13", "gpt_opset21"]:
        assert f"{v}.onnx" in files and f"{v}.expected.json" in files
    assert "gpt_external.onnx.data" in files
    assert not [f for f in files if f.startswith(".")]


@pytest.mark.parametrize("name", testmodels.all_names())
def test_testmodels_expected_losses(testmodel_dir, name):
    exp = json.loads((testmodel_dir / f"{name}.expected.json").read_text())
    data = np.load(testmodel_dir / exp["inputs_file"])
    names = [i["name"] for i in exp["inputs"]]
    feeds = {n: data[n] for n in names}
    for i in exp["inputs"]:
        assert list(feeds[i["name"]].shape) == i["shape"]
        assert str(feeds[i["name"]].dtype) == i["dtype"]
    assert float.fromhex(exp["loss_hex"]) == exp["loss"]
    model, inputs, _ = models.make(exp["model"], seed=exp["seed"])
    assert exp["loss"] == torch_loss(model, inputs)
    assert_close(ort_loss_named(testmodel_dir / f"{name}.onnx", feeds), exp["loss"])


def test_testmodels_variants(testmodel_dir):
    def load(n):
        return onnx.load(str(testmodel_dir / f"{n}.onnx"), load_external_data=False)

    static = load("gpt_static")
    assert all(i.type.tensor_type.shape.dim[0].dim_value == 2 for i in static.graph.input)
    assert load("gpt_opset13").opset_import[0].version == 13
    assert load("gpt_opset21").opset_import[0].version == 21
    ev = load("gpt_eval")
    assert meta(ev)["varuna.training"] == "0"
    assert any(n.op_type == "Identity" for n in ev.graph.node)
    assert not any(n.op_type == "Dropout" for n in ev.graph.node)
    assert len(ev.graph.initializer) < len(load("gpt").graph.initializer)
    ext = load("gpt_external")
    assert all(t.data_location == onnx.TensorProto.EXTERNAL for t in ext.graph.initializer)
    # TorchScript files carry varuna.json
    _, info = _ts_info(testmodel_dir / "gpt.pt")
    assert info["parameters"][0] == "wte.weight"


def test_testmodels_idempotent_and_deterministic(testmodel_dir, tmp_path):
    # In-process re-run: nothing changes on disk except TorchScript files,
    # whose class names TorchScript mangles differently within one process.
    before = {str(p.relative_to(testmodel_dir)): p.read_bytes()
              for p in testmodel_dir.rglob("*") if p.is_file()}
    mtimes = {f: os.stat(testmodel_dir / f).st_mtime_ns for f in before}
    assert testmodels.main([str(testmodel_dir), "-q"]) == 0
    after = {f: os.stat(testmodel_dir / f).st_mtime_ns for f in before}
    assert [f for f in before if after[f] != mtimes[f] and not f.endswith(".pt")] == []
    # The CLI (a fresh process each run) is byte-deterministic and idempotent.
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "varuna.testmodels", str(tmp_path), "--only", "gpt", "resnet"]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    assert "changed" in first.stdout
    snap = {str(p.relative_to(tmp_path)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in tmp_path.rglob("*") if p.is_file()}
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    assert second.stdout.count("(0 changed)") == 2, second.stdout
    assert {str(p.relative_to(tmp_path)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in tmp_path.rglob("*") if p.is_file()} == snap
    for f in snap:
        if not f.endswith(".pt"):
            assert snap[f][0] == before[f], f


def test_testmodels_cli_errors(tmp_path, capsys):
    assert testmodels.main([str(tmp_path), "--only", "nope"]) == 2
    assert "unknown test model" in capsys.readouterr().err
    assert testmodels.main(["--list"]) == 0
    assert "gpt_eval" in capsys.readouterr().out


# ---------------------------------------------------------------------------
# large models (opt-in)
# ---------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("VARUNA_SLOW_TESTS") != "1", reason="set VARUNA_SLOW_TESTS=1")
def test_over_2gb_export(tmp_path):
    """>2 GiB of parameters: automatic external data, embedded export refused."""
    model, inputs, names = models.make_gpt2_xl_shape(layers=16, batch=2, input_len=32)
    path = tmp_path / "big.onnx"
    varuna.export(model, inputs, path)
    assert (tmp_path / "big.onnx.data").stat().st_size > 2 ** 31
    assert sorted(os.listdir(tmp_path)) == ["big.onnx", "big.onnx.data"]
    with pytest.raises(ValueError, match="2 GiB protobuf limit"):
        varuna.export(model, inputs, tmp_path / "x.onnx", external_data=False)


class _Stateful(torch.nn.Module):
    """State written inside forward: a step counter scaling the logits, an
    EMA of the inputs normalizing them, or a weight clamped in place."""
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.fc = torch.nn.Linear(4, 3)
        self.bn = torch.nn.BatchNorm1d(4)  # its running statistics are fine
        self.register_buffer("step", torch.zeros(()))
        self.register_buffer("mu", torch.zeros(4))

    def forward(self, x, y):
        x = self.bn(x)
        if self.kind == "counter":
            self.step += 1
            logits = self.fc(x) / self.step
        elif self.kind == "ema":
            with torch.no_grad():
                self.mu.mul_(0.9).add_(0.1 * x.mean(0))
            logits = self.fc(x - self.mu)
        elif self.kind == "clamp":
            with torch.no_grad():
                self.fc.weight.clamp_(-0.1, 0.1)
            logits = self.fc(x)
        else:
            logits = self.fc(x)
        return torch.nn.functional.cross_entropy(logits, y)


@pytest.mark.parametrize("kind,what", [("counter", "step (buffer)"), ("ema", "mu (buffer)"),
                                       ("clamp", "fc.weight (parameter)")])
def test_error_state_written_in_forward(tmp_path, kind, what):
    # ONNX would drop the write silently: training drifted from PyTorch
    # after the first step (12% in a probe), with no message.
    model = _Stateful(kind)
    with pytest.raises(ValueError, match=r"forward changes " + re.escape(what) +
                       r" in place .* state from one step to the next"):
        varuna.export(model, pair_inputs(), tmp_path / "p.onnx")
    assert not os.listdir(tmp_path)
    # The batch norm's own running statistics alone are kept, not refused.
    varuna.export(_Stateful("none"), pair_inputs(), tmp_path / "ok.onnx")


class _Norm(torch.nn.Module):
    """A norm over 4 channels, then a classifier."""
    def __init__(self, norm):
        super().__init__()
        self.norm = norm
        self.fc = torch.nn.Linear(4 * 5, 3)

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.fc(self.norm(x).flatten(1)), y)


@pytest.mark.parametrize("suffix", ["onnx", "pt"])
@pytest.mark.parametrize("norm,match", [
    (lambda: torch.nn.BatchNorm1d(4, momentum=None),
     r"norm \(BatchNorm1d\) has momentum=None: a cumulative average"),
    (lambda: torch.nn.InstanceNorm1d(4, track_running_stats=True),
     r"norm \(InstanceNorm1d\) tracks running statistics")])
def test_error_norm_statistics_the_graph_gets_wrong(tmp_path, suffix, norm, match):
    # A probe's: momentum=None's factor was traced as 1.0 (the running
    # statistics became the last micro-batch's); an instance norm's tracked
    # statistics were dropped -- eval and checkpoints wrong without a word.
    x, y = torch.randn(4, 4, 5), torch.tensor([0, 1, 2, 0])
    with pytest.raises(ValueError, match=match):
        varuna.export(_Norm(norm()), (x, y), tmp_path / f"n.{suffix}")
    assert not os.listdir(tmp_path)
    # Their usual settings export.
    varuna.export(_Norm(torch.nn.BatchNorm1d(4)), (x, y), tmp_path / f"bn.{suffix}")
    varuna.export(_Norm(torch.nn.InstanceNorm1d(4)), (x, y), tmp_path / f"in.{suffix}")


class _ItemCount(torch.nn.Module):
    """A count of the batch taken with .item(): traced as a constant."""
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        n = (y > 0).sum().item() + 1
        return torch.nn.functional.cross_entropy(self.fc(x), y, reduction="sum") / n


@pytest.mark.parametrize("suffix", ["onnx", "pt"])
def test_warns_python_number_from_tensor(tmp_path, suffix):
    # The probe's itemcount: 4x off PyTorch with only torch's own warning,
    # which varuna.export's output did not pass on in its words.
    with pytest.warns(UserWarning, match=r"turns a tensor into a Python number \(1 place\(s\): "
                      r".*test_export.py:\d+.*constant"):
        varuna.export(_ItemCount(), pair_inputs(), tmp_path / f"p.{suffix}")


class _GradientPenalty(torch.nn.Module):
    """A WGAN-GP style penalty: the gradient of the output with respect to
    the input, taken inside forward."""
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        x = x.detach().requires_grad_(True)
        out = self.fc(x)
        g, = torch.autograd.grad(out.sum(), x, create_graph=True)
        return torch.nn.functional.cross_entropy(out, y) + g.pow(2).mean()


@pytest.mark.parametrize("suffix", ["onnx", "pt"])
def test_error_gradient_inside_forward(tmp_path, suffix):
    # Before: torch's tracer error ("Cannot insert a Tensor that requires
    # grad as a constant"), which names neither the cause nor the line.
    with pytest.raises(ValueError, match=r"forward computes gradients itself \(torch.autograd.grad"
                       r" or backward, at .*test_export.py:\d+\)"):
        varuna.export(_GradientPenalty(), pair_inputs(), tmp_path / f"p.{suffix}")
    assert not os.listdir(tmp_path)


class _TrainingBranch(nn.Module):
    """A loss term only training adds (an auxiliary penalty): the exported
    graph is the training one, so validation counts it (model.eval() would
    not)."""

    def __init__(self, aux=True):
        super().__init__()
        self.aux = aux
        self.l1, self.l2 = nn.Linear(4, 8), nn.Linear(8, 3)
        self.drop, self.bn = nn.Dropout(0.1), nn.BatchNorm1d(8)

    def forward(self, x, y):
        h = torch.tanh(self.bn(self.l1(self.drop(x))))
        if self.aux:
            loss = F.cross_entropy(self.l2(h), y)
            if self.training:
                loss = loss + 0.5 * h.pow(2).mean()
            return loss
        # Only a dropout probability depends on the mode: the same ops.
        return F.cross_entropy(F.dropout(self.l2(h), 0.1 if self.training else 0.0), y)


@pytest.mark.parametrize("suffix", [".onnx", ".pt"])
def test_warns_training_only_branch(tmp_path, suffix):
    x, y = torch.randn(4, 4), torch.randint(0, 3, (4,))
    with pytest.warns(UserWarning, match=r"forward takes other operations in training mode "
                      r"than in model.eval\(\): aten::add \(x1 in training only\).*validation"):
        varuna.export(_TrainingBranch(), (x, y), tmp_path / ("a" + suffix))
    # Dropout and batch norms (torch.nn's, whose modes Varuna runs) and a
    # mode-dependent dropout probability: no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        varuna.export(_TrainingBranch(aux=False), (x, y), tmp_path / ("b" + suffix))


def test_onnx_large_graph_skips_onnxruntime_check_and_says_so(tmp_path, monkeypatch):
    # onnxruntime's set-up grows faster than the graph (34 s for 24k nodes):
    # above ORT_CHECK_NODE_LIMIT the check is skipped, with a warning.
    vx = sys.modules["varuna.export"]  # (varuna.export is the function)
    monkeypatch.setattr(vx, "ORT_CHECK_NODE_LIMIT", 3)
    x, y = torch.randn(4, 4), torch.randint(0, 3, (4,))
    with pytest.warns(UserWarning, match=r"the exported graph has \d+ nodes: not run with "
                      r"onnxruntime to check it \(above ORT_CHECK_NODE_LIMIT = 3"):
        varuna.export(_TrainingBranch(aux=False), (x, y), tmp_path / "m.onnx")


# ---------------------------------------------------------------------------
# arguments the tester found unchecked
# ---------------------------------------------------------------------------

class _TopParam(nn.Module):
    """A parameter named as forward's argument `y` (and a buffer `scale`)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.y = nn.Parameter(torch.ones(3))
        self.register_buffer("scale", torch.ones(3))

    def forward(self, x, y):
        return F.cross_entropy(self.lin(x) * self.y * self.scale, y)


@pytest.mark.parametrize("suffix", ["onnx", "pt"])
@pytest.mark.parametrize("case,match", [
    ("input", r"input name 'lin.weight' is also the name of a parameter.*'lin.weight.1'"),
    ("loss", r"loss_name 'lin.bias' is also the name of a parameter.*pass another loss_name"),
    ("buffer", r"input name 'scale' is also the name of a buffer"),
    ("dict", r"input name 'y' is also the name of a parameter.*rename forward's argument"),
])
def test_error_input_or_loss_name_is_a_state_name(tmp_path, suffix, case, match):
    # torch's ONNX exporter renamed the initializer ("l1.weight.1"), after
    # which the run's checkpoint did not load into the model.
    x, y = pair_inputs()
    path = tmp_path / f"p.{suffix}"
    with pytest.raises(ValueError, match=match):
        if case == "input":
            varuna.export(_TopParam(), (x, y), path, input_names=["lin.weight", "t"])
        elif case == "loss":
            varuna.export(_TopParam(), (x, y), path, input_names=["x", "t"],
                          loss_name="lin.bias")
        elif case == "buffer":
            varuna.export(_TopParam(), (x, y), path, input_names=["scale", "t"])
        else:
            varuna.export(_TopParam(), {"x": x, "y": y}, path)
    assert not os.listdir(tmp_path)


class _BatchCount(nn.Module):
    """A summed loss divided by the batch size read as a Python number."""

    def __init__(self, how):
        super().__init__()
        self.lin, self.how = nn.Linear(4, 3), how

    def forward(self, x, y):
        n = int(x.size(0)) if self.how == "int" else len(x)
        return F.cross_entropy(self.lin(x), y, reduction="sum") / n


@pytest.mark.parametrize("suffix", ["onnx", "pt"])
@pytest.mark.parametrize("how", ["int", "len"])
def test_warns_batch_size_turned_into_a_number_is_frozen(tmp_path, suffix, how):
    # The batch size is a shape that changes (varuna runs micro-batches
    # smaller than the example batch): the warning must not call it harmless,
    # and len(x) is said in varuna's words, not only torch's.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        varuna.export(_BatchCount(how), pair_inputs(4), tmp_path / f"p.{suffix}")
    texts = [str(w.message) for w in caught]
    ours = [t for t in texts if "turns a tensor into a Python number" in t]
    assert len(ours) == 1, texts
    assert re.search(r"batch size is not: a size along the batch axis .*frozen at the "
                     r"example's 4.*x\.shape\[0\] as it is", ours[0]), ours[0]
    assert not any(t.startswith("Using len to get tensor shape") for t in texts), texts


@pytest.mark.parametrize("opset", [12, 22, 0, -1, 99])
def test_error_opset_out_of_range(tmp_path, opset):
    from varuna.export import ONNX_OPSETS
    assert ONNX_OPSETS == (13, 21)
    with pytest.raises(ValueError, match=rf"opset {opset} .*supported opsets are 13 to 21"):
        varuna.export(Pair(), pair_inputs(), tmp_path / "p.onnx", opset=opset)
    assert not os.listdir(tmp_path)


def test_opset_numpy_integer(tmp_path):
    """A numpy integer is an int for the opset (it was "opset must be an int")."""
    import numpy as np
    varuna.export(Pair(), pair_inputs(), tmp_path / "p.onnx", opset=np.int64(17))


@pytest.mark.parametrize("name,fmt,match", [
    ("m.onnx", "ts", r"format='ts' writes TorchScript, but varuna-compile would read its "
                     r"suffix '\.onnx' as ONNX; name it \.pt or \.pth"),
    ("m.pt", "onnx", r"format='onnx' writes ONNX, .*suffix '\.pt' as TorchScript; name it "
                     r"\.onnx"),
    ("model.bin", "torchscript", r"does not read the suffix '\.bin'; name it \.pt or \.pth"),
    ("nosuffix", None, r"nosuffix': it has no suffix.*name it \.onnx \(ONNX\) or \.pt"),
    ("UP.PT", None, r"case-sensitively and does not know '\.PT'; name it \.pt"),
    ("UP.ONNX", "onnx", r"case-sensitively and does not know '\.ONNX'; name it \.onnx"),
])
def test_error_path_suffix_varuna_compile_would_misread(tmp_path, name, fmt, match):
    with pytest.raises(ValueError, match=match):
        varuna.export(Pair(), pair_inputs(), tmp_path / name, format=fmt)
    assert not os.listdir(tmp_path)


def test_error_bad_output_path(tmp_path, monkeypatch):
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("")
    before = sorted(os.listdir(tmp_path))
    cases = [(tmp_path / "adir", r"'.*adir' is a directory"),
             (str(tmp_path / "adir") + os.sep, r"is a directory"),
             (tmp_path / "afile" / "m.onnx", r"cannot write .*'.*afile' is a file, not a "
                                             r"directory"),
             (tmp_path / "afile" / "sub" / "m.onnx", r"'.*afile' is a file"),
             (str(tmp_path / "m.onnx").encode(), r"path must be a str .*got bytes"),
             (3, r"path must be a str or a pathlib.Path, got int")]
    for path, match in cases:
        with pytest.raises(ValueError, match=match):
            varuna.export(Pair(), pair_inputs(), path)
    assert sorted(os.listdir(tmp_path)) == before
    assert os.listdir(tmp_path / "adir") == []
    # "" wrote "..tmp<PID>" into the parent of the working directory.
    monkeypatch.chdir(tmp_path / "adir")
    with pytest.raises(ValueError, match="path is empty"):
        varuna.export(Pair(), pair_inputs(), "")
    assert sorted(os.listdir(tmp_path)) == before
    assert os.listdir(tmp_path / "adir") == []


def test_write_failure_is_an_oserror_naming_the_path(tmp_path, monkeypatch):
    # A full disk is said as such, for the file asked for, without the
    # advice for models torch's exporter cannot export; nothing is left.
    import errno

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(torch.onnx, "export", full)
        with pytest.raises(OSError, match=r"cannot write '.*out.m\.onnx': No space left") as e:
            varuna.export(Pair(), pair_inputs(), tmp_path / "out" / "m.onnx")
        assert e.value.errno == errno.ENOSPC and "TorchScript" not in str(e.value)
    with monkeypatch.context() as m:
        m.setattr(torch.jit.ScriptModule, "save", lambda self, f, **kw: full())
        with pytest.raises(OSError, match=r"cannot write '.*out.m\.pt': No space left"):
            varuna.export(Pair(), pair_inputs(), tmp_path / "out" / "m.pt")
    assert os.listdir(tmp_path / "out") == []
    # Failing in the last rename: the temporary file beside the target was left.
    real_replace = os.replace

    def no_rename(src, dst):
        if str(dst).endswith("m.onnx"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst)

    with monkeypatch.context() as m:
        m.setattr(os, "replace", no_rename)
        with pytest.raises(OSError, match=r"cannot write '.*out.m\.onnx'"):
            varuna.export(Pair(), pair_inputs(), tmp_path / "out" / "m.onnx")
    assert os.listdir(tmp_path / "out") == []


@pytest.mark.parametrize("dtype,which,match", [
    (torch.bfloat16, 0, r"'x' is bfloat16.*it reads float32, .*bool\); pass it as float32 "
                        r"and cast it inside forward \(x\.to\(torch\.bfloat16\)\)"),
    (torch.int16, 1, r"'y' is int16.*pass it as int64 \(or int32\)"),
    (torch.complex64, 0, r"'x' is complex64.*real and imaginary parts"),
])
def test_error_input_dtype_varuna_run_cannot_read(tmp_path, dtype, which, match):
    # varuna-run refused such inputs whatever the data ("unsupported element
    # type 'bf16'"): the export passed, the training never ran.
    inputs = list(pair_inputs())
    inputs[which] = inputs[which].to(dtype)
    with pytest.raises(ValueError, match=match):
        varuna.export(Pair(), tuple(inputs), tmp_path / "p.pt")
    assert not os.listdir(tmp_path)


def test_error_empty_batch(tmp_path):
    x, y = pair_inputs()
    with pytest.raises(ValueError, match=r"example batch is empty \(size 0 along batch_dim=0\)"):
        varuna.export(Pair(), (x[:0], y[:0]), tmp_path / "p.onnx")
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("value,what", [(False, "a bool"), (None, "None"), (3, "a int")])
def test_error_dict_input_not_a_tensor_named_by_key(tmp_path, value, what):
    x, y = pair_inputs()
    with pytest.raises(ValueError, match=rf"example_inputs\['return_dict'\] is {what}, not a "
                                         r"torch.Tensor.*leave 'return_dict' out"):
        varuna.export(Pair(), {"x": x, "y": y, "return_dict": value}, tmp_path / "p.onnx")


@pytest.mark.parametrize("case,cause,match", [
    ("missing", TypeError, r"missing 1 required positional argument: 'y'"),
    ("shape", RuntimeError, r"cannot be multiplied"),
    ("key", TypeError, r"unexpected keyword argument 'z'.*names \(the keys\)"),
])
def test_error_forward_fails_on_example_inputs(tmp_path, case, cause, match):
    # The model's own exception, said to be about the example inputs, as a
    # ValueError with the original chained.
    x, y = pair_inputs()
    inputs = {"missing": (x,), "shape": (x[:, :2], y), "key": {"x": x, "z": y}}[case]
    with pytest.raises(ValueError, match=r"the model's forward failed on the example inputs "
                                         rf"\({cause.__name__}: .*{match}") as e:
        varuna.export(Pair(), inputs, tmp_path / "p.onnx")
    assert isinstance(e.value.__cause__, cause)
    assert not os.listdir(tmp_path)


def test_held_eval_batch_norm_with_cumulative_momentum_exports(tmp_path):
    """A batch norm held in eval mode (frozen) never moves its statistics, so
    momentum=None (refused for a training one) does not matter: exported."""
    import torch.nn as nn
    import torch.nn.functional as F

    class N(nn.Module):
        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(3, 4, 3)
            self.bn = nn.BatchNorm2d(4, momentum=None)
            self.fc = nn.Linear(4, 2)

        def forward(self, x, y):
            return F.cross_entropy(self.fc(self.bn(self.c(x)).mean((2, 3))), y)

    n = N()
    n.train()
    n.bn.eval()
    ex = (torch.randn(4, 3, 8, 8), torch.randint(0, 2, (4,)))
    for name in ("n.onnx", "n.pt"):
        varuna.export(n, ex, str(tmp_path / name))
    n.bn.train()  # training it, the cumulative average is refused
    with pytest.raises(ValueError, match="momentum=None"):
        varuna.export(n, ex, str(tmp_path / "t.onnx"))
