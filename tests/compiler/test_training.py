"""Training through the torch.compile backend: in grad mode, with parameters or inputs that require grad, the
forward and the backward graph are both luminal_lab programs, whose gradients and optimiser steps match eager's;
under ``torch.no_grad()`` only the forward is compiled."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import luminal_lab as ll
from luminal_lab.compiler.dynamo import DynamoProgram
from luminal_lab.compiler.training import through_aot
from luminal_lab.frontends.aten import TABLE
from luminal_lab.frontends.export import export_core_aten
from tests.helpers.causal_lms import llama, prompt
from tests.helpers.models import LlamaBlock, llama_inputs

OPTIONS = {"generations": 0, "cache_dir": False, "strict": True}  # a refused op raises
TOLERANCE = {"atol": 1e-5, "rtol": 1e-4}


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class NormMLP(nn.Module):
    """Linear, GELU, LayerNorm, linear: a classifier's logits."""

    def __init__(self, d_in: int = 8, d_hidden: int = 16, classes: int = 4, *, seed: int = 0):
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.fc1 = nn.Linear(d_in, d_hidden)
            self.norm = nn.LayerNorm(d_hidden)
            self.fc2 = nn.Linear(d_hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.norm(F.gelu(self.fc1(x))))


def batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(6, 8, generator=generator), torch.randint(0, 4, (6,), generator=generator)


def gradients(model: nn.Module, run: nn.Module, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    """The gradients of the cross-entropy of ``run(x)`` by ``.backward()``: every parameter's of ``model``, then
    the input's."""
    x = x.clone().requires_grad_(True)
    model.zero_grad(set_to_none=True)
    F.cross_entropy(run(x), y).backward()
    return [p.grad for p in model.parameters()] + [x.grad]


def test_backward_gives_eager_gradients_for_every_parameter_and_the_input() -> None:
    model, twin = NormMLP(), NormMLP()
    compiled = torch.compile(model, backend="luminal_lab", options=OPTIONS)
    x, y = batch()
    got, expected = gradients(model, compiled, x, y), gradients(twin, twin, x, y)
    assert all(g is not None for g in got) and len(got) == 7
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, **TOLERANCE)


@pytest.mark.parametrize("sdpa", [False, True], ids=["masked_fill", "sdpa"])
def test_the_llama_block_gives_eager_gradients(sdpa: bool) -> None:
    """The Llama block (RMSNorm, rotary causal attention, SiLU-gated MLP), its attention written out or as sdpa:
    the most-fused genome of each program is checked against the reference first (the backward's on stand-ins,
    whose gradients reach 1e6 and cancel), and every gradient matches eager's."""
    model, twin = LlamaBlock(sdpa=sdpa), LlamaBlock(sdpa=sdpa)
    compiled = torch.compile(model, backend="luminal_lab", options={"budget": 0.0, "cache_dir": False})
    (x,) = llama_inputs()

    def grads(module: nn.Module, run: nn.Module) -> list[torch.Tensor]:
        given = x.clone().requires_grad_(True)
        run(given).square().mean().backward()
        return [p.grad for p in module.parameters()] + [given.grad]

    for g, e in zip(grads(model, compiled), grads(twin, twin), strict=True):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-4)
    assert len(ll.programs(compiled)) == 2


def test_the_forward_and_backward_are_programs() -> None:
    """``ll.programs`` lists the forward (the input in, parameters held as weights, activations out after the
    logits) and then the backward (the activations and the logits' gradient in, a gradient per input out). The
    parameters that the backward reads are handed to it as they are, not through the forward's program."""
    model = NormMLP()
    compiled = torch.compile(model, backend="luminal_lab", options=OPTIONS)
    x, y = batch()
    F.cross_entropy(compiled(x.requires_grad_(True)), y).backward()
    forward, backward = ll.programs(compiled)
    assert len(forward.signature.inputs) == 1 and len(forward.graph.weights) == len(list(model.parameters()))
    assert len(forward.graph.outputs) > 1  # the logits, then the saved activations
    llir = forward.llir()
    kernels = {k.id: k for k in llir.kernels}
    assert not [k for k in llir.kernels if k.op == "Output" and kernels[k.sources[0][0]].op == "Input"]
    assert set(backward.signature.inputs) & set(forward.graph.weights)  # the parameters themselves
    assert not backward.graph.weights and backward.signature.inputs[-1].startswith("tangents")
    assert len(backward.graph.outputs) == 7  # a gradient per parameter, and the input's


def test_aot_graphs_export_to_the_same_ops_undecomposed() -> None:
    """The backend exports AOTAutograd's forward and backward without decomposing them again (``core_aten``): they
    are core aten already, so the export gives the very ops the decomposition would, node for node."""
    from torch._functorch.aot_autograd import make_boxed_func

    graphs: list[tuple[torch.fx.GraphModule, list]] = []

    def record(graph: torch.fx.GraphModule, inputs: list) -> Callable:
        graphs.append((graph, inputs))
        return make_boxed_func(graph.forward)

    def backend(gm: torch.fx.GraphModule, inputs: list) -> Callable:
        return through_aot(gm, inputs, record, record)

    model = LlamaBlock()
    (x,) = llama_inputs()
    torch.compile(model, backend=backend)(x.requires_grad_(True)).sum().backward()
    assert len(graphs) == 2
    for graph, inputs in graphs:
        concrete = tuple(torch.zeros(t.shape, dtype=t.dtype) for t in inputs)
        ops = [[str(n.target) for n in export_core_aten(graph, concrete, decompose=decompose).graph.nodes
                if n.op == "call_function"] for decompose in (True, False)]
        assert ops[0] == ops[1] and "aten.mm.default" in ops[0]


def test_the_embedding_gradient_is_a_scatter_add() -> None:
    """An embedding's gradient adds each token's row gradient into its row (repeated tokens adding up): one
    ``ScatterAdd`` of the tokens' rows, no vocabulary × tokens × width comparison."""
    vocab, width = 1000, 16
    model = nn.Sequential(nn.Embedding(vocab, width), nn.Linear(width, 3))
    twin = copy.deepcopy(model)
    compiled = torch.compile(model, backend="luminal_lab", options=OPTIONS)
    tokens = torch.tensor([[5, 7, 5, 999], [0, 7, 7, 5]])
    compiled(tokens).square().sum().backward()
    twin(tokens).square().sum().backward()
    for got, expected in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(got.grad, expected.grad, **TOLERANCE)
    backward = ll.programs(compiled)[-1]
    assert any(node.op == ll.Op.SCATTER_ADD for node in backward.graph.nodes)
    assert max(math.prod(d.value for d in node.shape) for node in backward.graph.nodes) <= vocab * width


def test_autograd_grad_gives_eager_gradients() -> None:
    """``torch.autograd.grad`` of a loss by the input and the parameters; the input alone needs no gradient of
    the parameters, so a parameter that needs none still has its gradient taken as eager does."""
    model, twin = NormMLP(), NormMLP()
    compiled = torch.compile(model, backend="luminal_lab", options=OPTIONS)
    x, y = batch()

    def grads(module: nn.Module, run: nn.Module) -> tuple[torch.Tensor, ...]:
        given = x.clone().requires_grad_(True)
        loss = F.cross_entropy(run(given), y)
        return torch.autograd.grad(loss, [given, *module.parameters()])

    for g, e in zip(grads(model, compiled), grads(twin, twin), strict=True):
        torch.testing.assert_close(g, e, **TOLERANCE)


def test_parameters_without_an_input_gradient() -> None:
    """An input that requires no grad: the backward returns no gradient for it, the parameters' match eager's."""
    model, twin = NormMLP(), NormMLP()
    compiled = torch.compile(model, backend="luminal_lab", options=OPTIONS)
    x, y = batch()
    F.cross_entropy(compiled(x), y).backward()
    F.cross_entropy(twin(x), y).backward()
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, **TOLERANCE)
    assert len(ll.programs(compiled)) == 2


@pytest.mark.parametrize("optimiser", [torch.optim.SGD, torch.optim.AdamW])
def test_optimiser_steps_track_eager(optimiser: type[torch.optim.Optimizer]) -> None:
    """A few steps on one batch, the parameters updated in place between calls: the compiled model's losses and
    parameters follow eager's."""
    model, twin = NormMLP(), NormMLP()
    compiled = torch.compile(model, backend="luminal_lab", options=OPTIONS)
    x, y = batch()
    losses: list[list[float]] = []
    for module, run in ((model, compiled), (twin, twin)):
        step = optimiser(module.parameters(), lr=0.05)
        seen = []
        for _ in range(4):
            step.zero_grad()
            loss = F.cross_entropy(run(x), y)
            loss.backward()
            step.step()
            seen.append(loss.item())
        losses.append(seen)
    got, expected = losses
    assert expected[-1] < expected[0]  # eager learns; the compiled model follows it
    torch.testing.assert_close(torch.tensor(got), torch.tensor(expected), **TOLERANCE)
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p, q, **TOLERANCE)


def test_no_grad_compiles_only_the_forward() -> None:
    model = NormMLP()
    compiled = torch.compile(model, backend="luminal_lab", options=OPTIONS)
    x, _ = batch()
    with torch.no_grad():
        out = compiled(x)
        torch.testing.assert_close(out, model(x), **TOLERANCE)
    assert not out.requires_grad
    (forward,) = ll.programs(compiled)
    assert len(forward.graph.outputs) == 1  # the logits alone: no activations saved


def test_a_new_batch_size_trains_through_one_dynamic_forward_and_backward() -> None:
    """After a second batch size dynamo makes the batch dynamic: one more forward and backward, of a symbolic
    batch, then serve every size, and no size is guarded to a number on the way."""
    model, twin = NormMLP(), NormMLP()
    compiled = torch.compile(model, backend="luminal_lab", options=OPTIONS)
    for size in (3, 5, 7, 9):
        generator = torch.Generator().manual_seed(size)
        x, y = torch.randn(size, 8, generator=generator), torch.randint(0, 4, (size,), generator=generator)
        for module, run in ((model, compiled), (twin, twin)):
            module.zero_grad(set_to_none=True)
            F.cross_entropy(run(x), y).backward()
        for p, q in zip(model.parameters(), twin.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, **TOLERANCE)
    found = ll.programs(compiled)
    assert len(found) == 4 and [comp.graph.dynamic for comp in found] == [False, False, True, True]


def test_an_op_without_a_translation_in_the_backward_is_refused_at_compile_time() -> None:
    """GELU's backward computes ``erf``, which its forward does not: without a translation of it the first call
    (not the first ``backward()``) raises ``UnsupportedOpError`` naming it, before the forward's genome is chosen
    (its e-graph built)."""
    compiled = torch.compile(NormMLP(), backend="luminal_lab", options=OPTIONS)
    x, _ = batch()
    with mock.patch.dict(TABLE), mock.patch.object(DynamoProgram, "choose_genome") as choose, \
            pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info:
        del TABLE[torch.ops.aten.erf.default]
        compiled(x)
    error = info.value.inner_exception
    assert isinstance(error, ll.UnsupportedOpError) and "aten.erf.default" in str(error).splitlines()[0]
    assert not choose.called


class Noisy(nn.Module):
    """A linear layer, then dropout (in train mode, a random mask) or noise from ``rand_like``."""

    def __init__(self, noise: str):
        super().__init__()
        self.linear, self.noise = nn.Linear(8, 8), noise

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return F.dropout(y, 0.5, training=True) if self.noise == "dropout" else y * torch.rand_like(y)


@pytest.mark.parametrize(("noise", "op"), [("dropout", "aten.native_dropout.default"),
                                           ("rand_like", "aten.rand_like.default")])
def test_random_ops_in_training_are_refused_by_name(noise: str, op: str) -> None:
    """luminal_lab does not reproduce torch's random stream, so a random op is refused at the first call, naming it,
    never run with other random numbers than eager's."""
    compiled = torch.compile(Noisy(noise), backend="luminal_lab", options=OPTIONS)
    x, _ = batch()
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info:
        compiled(x.requires_grad_(True))
    error = info.value.inner_exception
    assert isinstance(error, ll.UnsupportedOpError) and op in str(error).splitlines()[0]


def test_a_transformers_llama_trains_like_eager() -> None:
    """A ``transformers`` Llama (its defaults: sdpa attention) with its LM loss: the first step's gradients equal
    eager's, and 20 AdamW steps track eager's losses within 1e-3 relative, through one forward and one backward."""
    model = llama().train()
    twin = copy.deepcopy(model)
    compiled = torch.compile(model, backend="luminal_lab", options=OPTIONS)
    ids = prompt(batch=2, length=12)
    losses: list[list[float]] = []
    first_gradients: list[list[torch.Tensor]] = []
    for module, run in ((model, compiled), (twin, twin)):
        step = torch.optim.AdamW(module.parameters(), lr=1e-2)
        seen = []
        for _ in range(20):
            step.zero_grad()
            loss = run(input_ids=ids, labels=ids).loss
            loss.backward()
            if not seen:
                first_gradients.append([p.grad.clone() for p in module.parameters()])
            step.step()
            seen.append(loss.item())
        losses.append(seen)
    for g, e in zip(*first_gradients, strict=True):
        torch.testing.assert_close(g, e, **TOLERANCE)
    got, expected = losses
    assert expected[-1] < 0.9 * expected[0]  # eager learns the batch; the compiled model follows it
    torch.testing.assert_close(torch.tensor(got), torch.tensor(expected), atol=0.0, rtol=1e-3)
    assert len(ll.programs(compiled)) == 2


def test_batch_norm_in_train_mode_updates_its_running_statistics_as_eager() -> None:
    """BatchNorm1d in train mode normalises by the batch's statistics and updates its running mean, variance and
    batch count, written back to its buffers after each call: three steps on three batches agree with eager."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 3)).train()
    twin = copy.deepcopy(model)
    compiled = torch.compile(model, backend="luminal_lab", options=OPTIONS)
    labels = torch.tensor([0, 2, 1, 1, 0])
    for seed in range(3):
        x = torch.randn(5, 8, generator=torch.Generator().manual_seed(seed))
        for module, run in ((model, compiled), (twin, twin)):
            module.zero_grad(set_to_none=True)
            F.cross_entropy(run(x), labels).backward()
        for p, q in zip(model.parameters(), twin.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, **TOLERANCE)
        for b, c in zip(model.buffers(), twin.buffers(), strict=True):
            torch.testing.assert_close(b, c, **TOLERANCE)
    assert int(model[1].num_batches_tracked) == 3


# average pooling geometries: overlapping windows with padding counted or not, ceil mode's partial last window, a
# divisor
POOLS = ({"kernel_size": 3, "stride": 2, "padding": 1}, {"kernel_size": 3, "stride": 2, "padding": 1,
                                                         "count_include_pad": False},
         {"kernel_size": 2, "stride": 3, "ceil_mode": True}, {"kernel_size": 2, "divisor_override": 3})


def test_pooling_and_replication_padding_gradients_equal_eager() -> None:
    """``avg_pool2d_backward`` and ``avg_pool3d_backward`` (each window's gradient over its divisor added into what it
    read) for several geometries, adaptive average pooling's gradient, 3-d max pooling's (each maximum's gradient
    added where it was read) and replication padding's (each element's gradient added into the element it copies; a
    negative padding crops), in one program each way."""
    def pools(x: torch.Tensor) -> torch.Tensor:
        pooled = [F.avg_pool2d(x, **pool) for pool in POOLS]
        pooled += [F.avg_pool3d(x.unsqueeze(1), 2, 1), F.adaptive_avg_pool2d(x, (4, 3)),
                   F.max_pool3d(x.unsqueeze(1), 2, 2), F.adaptive_max_pool3d(x.unsqueeze(1), (1, 3, 5))]
        pooled += [F.pad(x[:, :, 0], (2, 3), "replicate"), F.pad(x, (1, -2, 3, 0), "replicate"),
                   F.pad(x.unsqueeze(1), (1, 1, 0, 2, 1, 0), "replicate")]
        return sum((p * torch.linspace(-1, 1, p.numel()).reshape(p.shape)).sum() for p in pooled)

    compiled = torch.compile(pools, backend="luminal_lab", options=OPTIONS | {"fusion": False})
    x = torch.randn(2, 3, 9, 10, generator=torch.Generator().manual_seed(0))
    got, expected = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    compiled(got).backward()
    pools(expected).backward()
    torch.testing.assert_close(got.grad, expected.grad, **TOLERANCE)
    assert len(ll.programs(compiled)) == 2


@pytest.mark.parametrize("conv", [nn.Conv1d, nn.Conv2d], ids=["1d", "2d"])
@pytest.mark.parametrize("geometry", [{}, {"stride": 2, "padding": 1}, {"padding": 2, "dilation": 2, "groups": 2},
                                      {"stride": 3, "padding": 1, "groups": 4}], ids=str)
def test_convolution_gradients_by_input_weight_and_bias_equal_eager(conv: type[nn.Module], geometry: dict) -> None:
    """``convolution_backward``: the input's gradient (the output's gradient spread by the stride and convolved with
    the flipped weight), the weight's (the input's windows against it) and the bias's, for strides, padding,
    dilation and groups."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = conv(4, 8, 3, **geometry)
    twin = copy.deepcopy(model)
    compiled = torch.compile(model, backend="luminal_lab", options=OPTIONS)
    shape = (2, 4, 11) if conv is nn.Conv1d else (2, 4, 9, 10)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    got, expected = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    compiled(got).square().sum().backward()
    twin(expected).square().sum().backward()
    torch.testing.assert_close(got.grad, expected.grad, **TOLERANCE)
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-4, rtol=1e-4)


def test_a_cnn_with_batch_norm_and_pooling_trains_like_eager() -> None:
    """Convolutions, batch norm in train mode, max and adaptive average pooling: gradients and running statistics
    as eager's, through the most-fused genomes (max pooling's gradient fuses a flat select into a row region)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(4, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)).train()
    twin = copy.deepcopy(model)
    compiled = torch.compile(model, backend="luminal_lab", options=OPTIONS)
    x, labels = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1)), torch.tensor([0, 2])
    for run in (compiled, twin):
        F.cross_entropy(run(x), labels).backward()
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, **TOLERANCE)
    for b, c in zip(model.buffers(), twin.buffers(), strict=True):
        torch.testing.assert_close(b, c, **TOLERANCE)
