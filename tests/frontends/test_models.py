"""Real models with random weights and no downloads (transformers' Llama, GPT-2 and BERT from small configs,
torch's transformer layers and multi-head attention under no_grad, a small CNN) through ``ll.compile`` and
``torch.compile(backend="luminal_lab")``, checked against eager PyTorch; and the convolution and pooling ops the
CNN needs, which lower to windows of the input (views) and, for convolution, a matmul."""

from __future__ import annotations

import copy
import functools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import luminal_lab as ll
from luminal_lab.codegen.cuda import llir_sources
from luminal_lab.runtime.cuda import cuda_available, cuda_unavailable_reason
from tests.helpers.nvrtc import compile_kernels, needs_a_cuda_compiler
from tests.helpers.real_models import MODELS, Built

TOL = {"atol": 1e-4, "rtol": 1e-4}
# f32 matmuls on tensor cores round their operands to TF32 (10 mantissa bits)
GPU_TOL = {"atol": 5e-3, "rtol": 5e-3}
needs_gpu = pytest.mark.skipif(not cuda_available(), reason=f"needs a CUDA GPU: {cuda_unavailable_reason()}")

@functools.cache
def compiled(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...], ll.Compiled]:
    """One model, its inputs and its ``ll.compile``d program, shared by the tests of one process."""
    model, inputs = MODELS[name]()
    return model, inputs, ll.compile(model, inputs)


def eager(model: nn.Module, inputs: tuple[torch.Tensor, ...]):
    with torch.no_grad():
        return model(*inputs)


@pytest.mark.parametrize("name", MODELS)
def test_model_matches_eager_through_ll_compile(name: str) -> None:
    model, inputs, comp = compiled(name)
    torch.testing.assert_close(comp(*inputs), eager(model, inputs), **TOL)


@pytest.mark.parametrize("name", MODELS)
def test_model_matches_eager_through_torch_compile(name: str) -> None:
    model, inputs = MODELS[name]()
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    try:
        with torch.no_grad():
            got = torch.compile(model, backend="luminal_lab")(*inputs)
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    finally:
        torch._dynamo.reset()
    torch.testing.assert_close(got, eager(model, inputs), **TOL)
    assert graphs == 1, f"dynamo split the model into {graphs} graphs"


def test_a_second_model_after_a_decoder_layer_through_torch_compile() -> None:
    """torch.compile wraps every module's call in one frame, so the CNN's input, of another shape than the decoder
    layer's, comes marked dynamic (automatic dynamic shapes), and its head then fixes every size: dynamo hands the
    backend concrete tensors, whose export shares dynamo's shape environment. Its guards (on dynamo's names) once
    reached a generated ``_guards_fn``: ``NameError: name 'L' is not defined``."""
    torch._dynamo.reset()
    try:
        for name in ("decoder_layer", "conv1d_cnn"):
            model, inputs = MODELS[name]()
            with torch.no_grad():
                got = torch.compile(model, backend="luminal_lab", options={"generations": 0})(*inputs)
            torch.testing.assert_close(got, eager(model, inputs), **TOL, msg=lambda m, n=name: f"{n}: {m}")
    finally:
        torch._dynamo.reset()


def test_torch_compile_meets_the_encoder_layers_fast_path() -> None:
    """Under no_grad dynamo's graph holds torch's fused kernel itself, which the export then decomposes."""
    model, inputs = MODELS["encoder_layer"]()
    seen: list = []

    def capture(gm: torch.fx.GraphModule, example_inputs) -> torch.fx.GraphModule:
        seen.extend(n.target for n in gm.graph.nodes if n.op == "call_function")
        return gm

    torch._dynamo.reset()
    try:
        with torch.no_grad():
            torch.compile(model, backend=capture)(*inputs)
    finally:
        torch._dynamo.reset()
    assert torch._transformer_encoder_layer_fwd in seen


class FusedKernels(nn.Module):
    """torch's fused attention and encoder-layer kernels called directly, with and without masks."""

    def __init__(self):
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            self.layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True)

    def forward(self, x: torch.Tensor, padding: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        attention, layer = self.layer.self_attn, self.layer
        weights = (attention.in_proj_weight, attention.in_proj_bias, attention.out_proj.weight,
                   attention.out_proj.bias)
        per_head = torch._native_multi_head_attention(x, x, x, 32, 4, *weights, None, True, False)
        padded = torch._native_multi_head_attention(x, x, x, 32, 4, *weights, padding, True, True, 1)
        masked = torch._native_multi_head_attention(x, x, x, 32, 4, *weights, mask, False, True, 2)[0]
        encoded = torch._transformer_encoder_layer_fwd(
            x, 32, 4, *weights, True, True, layer.norm1.eps, layer.norm1.weight, layer.norm1.bias,
            layer.norm2.weight, layer.norm2.bias, layer.linear1.weight, layer.linear1.bias, layer.linear2.weight,
            layer.linear2.bias, padding, 1)
        return (*per_head, *padded, masked, encoded)


def _fused_kernels() -> tuple[nn.Module, tuple]:
    x = _randn(2, 8, 32)
    padding = torch.zeros(2, 8, dtype=torch.bool)
    padding[0, 5:] = True
    causal = torch.full((8, 8), -math.inf).triu(1).expand(2, 4, 8, 8)
    return FusedKernels().eval(), (x, padding, causal)


def test_fused_kernels_match_their_decompositions() -> None:
    model, inputs = _fused_kernels()
    for position, (got, expected) in enumerate(zip(ll.compile(model, inputs)(*inputs), eager(model, inputs),
                                                   strict=True)):
        torch.testing.assert_close(got, expected, **TOL, msg=lambda m, p=position: f"output {p}: {m}")


class CudaAttention(nn.Module):
    """The CUDA attention kernels dynamo's graph holds for ``F.scaled_dot_product_attention`` on a GPU, called
    directly (traced on the CPU through their meta functions): efficient (a float bias, with and without the
    log-sum-exp), flash (causal) and cuDNN (a bool mask), on grouped-query heads laid out ``[N, L, H, E]``."""

    def forward(self, q, k, v, bias, mask):
        efficient = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, bias, False)[0]
        with_lse, lse, _, _ = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, scale=0.3)
        flash, flash_lse, *_ = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, is_causal=True)
        cudnn = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, mask, False)[0]
        return efficient, with_lse, lse, flash, flash_lse, cudnn


def _cuda_attention_inputs() -> tuple[torch.Tensor, ...]:
    def heads(count: int, seed: int) -> torch.Tensor:  # [N, L, H, E] in memory, as transformers' projections give
        return _randn(2, 5, count, 8, seed=seed).transpose(1, 2)

    q, k, v = heads(4, 0), heads(2, 1), heads(2, 2)
    return q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), _randn(2, 4, 5, 5, seed=3), \
        _randn(2, 1, 5, 5, seed=4) > -0.5


def test_cuda_attention_kernels_match_torch_math_path() -> None:
    q, k, v, bias, mask = inputs = _cuda_attention_inputs()
    sdpa = F.scaled_dot_product_attention
    scores = (q @ k.transpose(-2, -1) * 0.3 + bias).float()
    expected = (sdpa(q, k, v, bias), sdpa(q, k, v, bias, scale=0.3), F.pad(scores.logsumexp(-1), (0, 27)),
                sdpa(q, k, v, is_causal=True),
                (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(torch.ones(5, 5).tril() == 0, -math.inf)
                .logsumexp(-1), sdpa(q, k, v, mask))
    got = ll.compile(CudaAttention(), inputs)(*inputs)
    for position, (have, want) in enumerate(zip(got, expected, strict=True)):
        torch.testing.assert_close(have, want, **TOL, msg=lambda m, p=position: f"output {p}: {m}")


def test_cuda_attention_decompositions_lay_out_their_outputs_as_the_kernels_do() -> None:
    """The strides a later ``view`` may rely on: the output's and the log-sum-exp's, as the kernel's meta function
    gives them (the random state, unused without dropout, has a dtype that changes between torch versions)."""
    from luminal_lab.frontends.fast_paths import DECOMPOSITIONS

    q, k, v, bias, mask = _cuda_attention_inputs()
    aten = torch.ops.aten
    calls = {aten._scaled_dot_product_efficient_attention.default: (q, k, v, bias, True),
             aten._scaled_dot_product_flash_attention.default: (q, k, v),
             aten._scaled_dot_product_cudnn_attention.default: (q, k, v, mask, True)}
    for op, args in calls.items():
        meta = op(*(a.to("meta") if isinstance(a, torch.Tensor) else a for a in args))
        ours = DECOMPOSITIONS[op](*args)
        assert len(ours) == len(meta), op
        for have, want in zip(ours[:2], meta[:2]):
            assert (have.shape, have.stride(), have.dtype) == (want.shape, want.stride(), want.dtype), op


def _items(snapshot, cid: str) -> list[str]:
    """The IR e-classes of an operand list e-class (its first ICons chain)."""
    items = []
    while cons := [n for n in snapshot.classes[cid].nodes if n.op == "ICons"]:
        items.append(cons[0].children[0])
        cid = cons[0].children[1]
    return items


def test_the_e_graph_holds_each_hlir_node_over_its_sources() -> None:
    """As loaded, every HLIR node's e-class holds its op over its sources' e-classes, in order. The program of this
    model (~240 nodes) once had node 122, ``x - mean``, read ``-mean`` twice: egglog 13.2 confused the globals
    ``$t12`` and ``$t121``, which is why let names end in ``_``."""
    model, inputs = _fused_kernels()
    comp = ll.compile(model, inputs)
    snapshot = comp.egraph.snapshot
    for node in comp.compiled_graph.live_nodes():
        if node.op in (ll.Op.INPUT, ll.Op.OUTPUT):
            continue
        cid = snapshot.eclass_of_hlir(node.id)
        operands = []
        for enode in snapshot.classes[cid].nodes:
            kinds = {kind.op for kind in snapshot.classes[enode.children[0]].nodes} if enode.op == "Op" else set()
            if node.op.value in kinds:
                operands.append(_items(snapshot, enode.children[1]))
        assert [snapshot.eclass_of_hlir(source.id) for source, _ in node.sources] in operands, node


@needs_a_cuda_compiler
@pytest.mark.parametrize("name", MODELS)
def test_every_kernel_of_the_model_compiles_for_the_gpu(name: str) -> None:
    """What the GPU runs of the model: every generated kernel of its genome compiles to PTX (no GPU needed)."""
    _, _, comp = compiled(name)
    assert compile_kernels(llir_sources(comp.llir()))


def test_convolutions_run_as_matmul_kernels() -> None:
    _, _, cnn = compiled("cnn")
    from_conv = [k.op for k in cnn.llir().kernels
                 if any("aten.convolution" in (cnn.graph.nodes[i].origin or "") for i in k.hlir)]
    assert from_conv.count("Matmul") == 2, from_conv  # the product and sum of each of the two convolutions


@needs_gpu
@pytest.mark.gpu
@pytest.mark.parametrize("name", MODELS)
def test_model_matches_eager_on_the_gpu(name: str) -> None:
    model, inputs, comp = compiled(name)
    on_gpu = tuple(t.cuda() for t in inputs)
    cudnn = torch.backends.cudnn  # its flags are frozen once torch's OpInfo tests are imported: set them in flags()
    with cudnn.flags(enabled=cudnn.enabled, benchmark=cudnn.benchmark, deterministic=cudnn.deterministic,
                     allow_tf32=False):
        expected = eager(copy.deepcopy(model).cuda(), on_gpu)
    torch.testing.assert_close(comp.run(*on_gpu, device="cuda"), expected, **GPU_TOL)


# ---- convolution and pooling ----------------------------------------------------------------------
def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _convolutions(x1, w1, x2, w2, b2, w3):
    return (F.conv1d(x1, w1, padding=2, dilation=2),
            F.conv1d(x1, w1, stride=3),
            F.conv2d(x2, w2, b2, stride=(2, 1), padding=(1, 2), groups=2),
            F.conv2d(x2, w3, dilation=2, padding="same"),
            F.conv2d(x2, w3[:, :1], groups=4))  # depthwise


def _poolings(x2, x1):
    values, indices = F.max_pool2d(x2, 3, 2, padding=1, ceil_mode=True, return_indices=True)
    return (values, indices,
            F.max_pool2d(x2, (2, 3), (1, 2), dilation=(2, 1)),
            F.avg_pool2d(x2, 3, 2, padding=1, ceil_mode=True),
            F.avg_pool2d(x2, 3, 2, padding=1, ceil_mode=True, count_include_pad=False),
            F.avg_pool2d(x2, 2, divisor_override=3),
            F.adaptive_avg_pool2d(x2, (3, 4)),
            F.adaptive_avg_pool2d(x2, 1),
            *F.adaptive_max_pool2d(x2, (3, 2), return_indices=True),
            F.max_pool1d(x1, 3, 2, padding=1),
            F.avg_pool1d(x1, 4, 3, ceil_mode=True),
            F.adaptive_avg_pool1d(x1, 3))


OPS: dict[str, Built] = {
    "convolutions": (_convolutions, (_randn(2, 3, 11), _randn(5, 3, 3, seed=1), _randn(2, 4, 9, 8, seed=2),
                                     _randn(6, 2, 3, 3, seed=3), _randn(6, seed=4), _randn(4, 4, 3, 3, seed=5))),
    "poolings": (_poolings, (_randn(2, 3, 9, 8), _randn(2, 3, 10, seed=1))),
}


@pytest.mark.parametrize("name", OPS)
def test_op_matches_eager(name: str) -> None:
    fn, inputs = OPS[name]
    expected = fn(*inputs)
    got = ll.compile(fn, inputs)(*inputs)
    assert len(got) == len(expected)
    for position, (a, b) in enumerate(zip(got, expected, strict=True)):
        torch.testing.assert_close(a, b, **TOL, msg=lambda m, p=position: f"output {p}: {m}")


def test_transposed_convolution_is_refused() -> None:
    with pytest.raises(ll.UnsupportedOpError, match=r"aten.convolution.default .*transposed"):
        ll.compile(lambda x, w: F.conv_transpose2d(x, w), (torch.randn(1, 2, 4, 4), torch.randn(2, 3, 3, 3)))


def test_adaptive_max_pool_of_unequal_windows_is_refused() -> None:
    with pytest.raises(ll.UnsupportedOpError, match=r"adaptive_max_pool2d.*\[7, 8\] to \[3, 3\]"):
        ll.compile(lambda x: F.adaptive_max_pool2d(x, 3), (torch.randn(1, 2, 7, 8),))


def test_windows_are_a_view_and_must_fit() -> None:
    g = ll.Graph()
    x = g.tensor((2, 7), name="x")
    windows = x.windows([1], [3], [2])
    assert windows.node is x.node and [d.value for d in windows.shape] == [2, 3, 3]
    windows.output("w")
    data = np.arange(14, dtype=np.float32).reshape(2, 7)
    got = ll.ReferenceRuntime(g).run({"x": data})["w"]
    np.testing.assert_array_equal(got, np.stack([data[:, p:p + 3] for p in (0, 2, 4)], axis=1))
    with pytest.raises(ll.ShapeError, match=r"window of 3 elements, stride 1, dilation 4 does not fit axis 1"):
        x.windows([1], [3], [1], [4])
