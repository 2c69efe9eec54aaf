"""Dynamic shapes through ``torch.compile``: the sizes dynamo treats as dynamic (after a second shape, with
``dynamic=True``, or ``mark_dynamic``) become the HLIR's symbolic dimensions, so one program (one export, e-graph,
search and cached genome) serves every length; SymInt arguments bind their variables; sizes torch specialises stay
numbers and the summary says which; ``ll.compile`` takes torch.export's ``dynamic_shapes``. Every output is checked
against eager torch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import luminal_lab as ll
from luminal_lab.search.records import TuningRecords

TOL = {"atol": 1e-4, "rtol": 1e-4}
FAST = {"generations": 0, "cache_dir": False}
LENGTHS = (3, 5, 9, 4, 16, 7)


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    """A fresh dynamo, in inference: in grad mode a model with parameters is compiled for training (forward and
    backward, ``test_training.py``)."""
    torch._dynamo.reset()
    with torch.no_grad():
        yield
    torch._dynamo.reset()


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class Scores(nn.Module):
    """``x @ w`` then softmax over the last axis (a parameter and a buffer, both the program's weights)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(_randn(8, 6, seed=1))
        self.register_buffer("scale", _randn(6, seed=2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.w * self.scale).softmax(-1)


def _symbolic(program: ll.Compiled, name: str) -> list[str]:
    return [str(d) for d in program.graph.inputs[name].node.shape]


def test_every_length_runs_one_program_after_the_first() -> None:
    model = Scores()
    fast = torch.compile(model, backend="luminal_lab", options=FAST)
    for length in LENGTHS:
        x = _randn(length, 8, seed=length)
        torch.testing.assert_close(fast(x), model(x), **TOL)
    programs = ll.programs(fast)
    assert len(programs) == 2  # the first call's static program, then the dynamic one
    dynamic = programs[-1]
    (name,) = dynamic.signature.inputs  # the parameter and the buffer are weights, as in the static program
    assert _symbolic(dynamic, name)[0].startswith("s") and _symbolic(dynamic, name)[1] == "8"
    assert f"symbolic {_symbolic(dynamic, name)[0]} = {name}[0]" in dynamic.hlir.summary()
    # the reference runtime and the compiled kernels run it at a length it never saw
    x = _randn(23, 8, seed=23)
    # (a dynamo graph returns a tuple)
    torch.testing.assert_close(dynamic.run_reference(x), (model(x),), **TOL)
    torch.testing.assert_close(dynamic.run(x), (model(x),), **TOL)


def test_dynamic_true_gives_one_program() -> None:
    model = Scores()
    fast = torch.compile(model, backend="luminal_lab", options=FAST, dynamic=True)
    for length in LENGTHS:
        x = _randn(length, 8, seed=length)
        torch.testing.assert_close(fast(x), model(x), **TOL)
    assert len(ll.programs(fast)) == 1


def test_mark_dynamic_gives_one_program() -> None:
    model = Scores()
    fast = torch.compile(model, backend="luminal_lab", options=FAST)
    for length in LENGTHS:
        x = _randn(length, 8, seed=length)
        torch._dynamo.mark_dynamic(x, 0)
        torch.testing.assert_close(fast(x), model(x), **TOL)
    (program,) = ll.programs(fast)
    assert not program.graph.inputs[program.signature.inputs[0]].node.shape[0].is_num


def masked_views(x: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A mask from a length argument, a reshape with -1, an expand and a slice to symbolic sizes."""
    keep = torch.arange(x.shape[0]) < n
    h = (x @ torch.ones(8, 6)).reshape(-1, 2, 3).expand(x.shape[0], 2, 3).reshape(x.shape[0], 6)
    return h.softmax(-1) * keep[:, None], x[: x.shape[0] - 1] * 2


def test_a_length_argument_binds_its_variable() -> None:
    fast = torch.compile(masked_views, backend="luminal_lab", options=FAST)
    for length in LENGTHS:
        x, n = _randn(length, 8, seed=length), max(length - 2, 2)
        torch.testing.assert_close(fast(x, n), masked_views(x, n), **TOL)
    programs = ll.programs(fast)
    assert len(programs) == 2
    dynamic = programs[-1]
    (size,) = dynamic.signature.sizes
    assert not dynamic.signature.sizes[size].is_num
    assert f"{dynamic.signature.sizes[size]} = {size}" in dynamic.hlir.summary()
    # the argument binds a variable of its own, not the tensor's length
    x = _randn(10, 8, seed=10)
    torch.testing.assert_close(dynamic.run(x, 3), masked_views(x, 3), **TOL)


def guarded(x: torch.Tensor) -> torch.Tensor:
    if x.shape[1] == 4:  # a guard: dynamo specialises the size to 4
        return (x * 2).sum(-1)
    return x.sum(-1)


def test_a_guarded_size_stays_specialised_and_the_summary_says_so() -> None:
    fast = torch.compile(guarded, backend="luminal_lab", options=FAST, dynamic=True)
    for length in LENGTHS:
        x = _randn(length, 4, seed=length)
        torch.testing.assert_close(fast(x), guarded(x), **TOL)
    (program,) = ll.programs(fast)
    (name,) = program.signature.inputs
    shape = _symbolic(program, name)
    assert shape[0].startswith("s") and shape[1] == "4"
    summary = program.hlir.summary()
    assert f"symbolic {shape[0]} = {name}[0]" in summary
    assert f"specialised {name}[1]=4" in summary


def test_the_dynamic_program_caches_one_genome_for_every_length(tmp_path: Path) -> None:
    model = Scores()
    options = {"generations": 0, "cache_dir": str(tmp_path)}
    fast = torch.compile(model, backend="luminal_lab", options=options, dynamic=True)
    for length in (3, 5, 9):
        fast(_randn(length, 8, seed=length))
    records = TuningRecords(tmp_path)
    (chosen,) = records.rows()  # one program, one genome chosen (unmeasured: no search)
    torch._dynamo.reset()  # a new compile at other lengths finds the same record
    fast = torch.compile(model, backend="luminal_lab", options=options, dynamic=True)
    for length in (12, 2):
        x = _randn(length, 8, seed=length)
        torch.testing.assert_close(fast(x), model(x), **TOL)
    assert records.rows() == [chosen]


def test_gpt2_at_twenty_lengths_runs_at_most_two_programs() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=96, n_embd=32, n_layer=1, n_head=4, n_positions=32,
                                     bos_token_id=0, eos_token_id=0, attn_implementation="eager")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = transformers.GPT2LMHeadModel(config).eval()
    fast = torch.compile(model, backend="luminal_lab", options=FAST)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for length in range(1, 21):
            ids = torch.randint(0, 96, (1, length), generator=generator)
            # use_cache=False: the empty KV cache's cat is another branch's work
            got = fast(ids, use_cache=False).logits
            torch.testing.assert_close(got, model(ids, use_cache=False).logits, **TOL)
    programs = ll.programs(fast)
    assert len(programs) <= 2
    assert "symbolic s" in programs[-1].hlir.summary()


def test_ll_compile_takes_dynamic_shapes() -> None:
    def masked(x: torch.Tensor, n: int) -> torch.Tensor:
        return (x @ torch.ones(8, 6)).softmax(-1) * (torch.arange(x.shape[0]) < n)[:, None]

    dim = torch.export.Dim.AUTO
    comp = ll.compile(masked, (_randn(5, 8), 3), dynamic_shapes={"x": {0: dim}, "n": dim})
    assert set(comp.signature.sizes) == {"n"}
    for length in (2, 7, 11):
        x = _randn(length, 8, seed=length)
        torch.testing.assert_close(comp(x, length // 2), masked(x, length // 2), **TOL)
        torch.testing.assert_close(comp.run_reference(x, length // 2), masked(x, length // 2), **TOL)
    with pytest.raises(ll.ShapeError, match="input 'n' is a size"):
        comp(_randn(4, 8), 2.5)


def causal_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """A causal mask built from the length (full, triu), added to the scores."""
    mask = torch.full((q.shape[0], q.shape[0]), float("-inf")).triu(1)
    return (q @ k.transpose(0, 1) / 8 ** 0.5 + mask).softmax(-1)


def tril_mask(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    keep = torch.ones(q.shape[0], q.shape[0], dtype=torch.bool).tril()
    return (q @ k.T).masked_fill(~keep, -1e9).softmax(-1)


def cat_and_split(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    both = torch.cat([x, y], dim=0)
    a, b = both.split([x.shape[0], y.shape[0]], dim=0)
    return a * 2 + b, both.sum(0)


def along_the_length(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (torch.zeros_like(x) + x.new_ones(x.shape[0], 1) * x.mean(0), x.flip(0), x.cumsum(0),
            x.transpose(0, 1).contiguous().view(-1))


def last_and_steps(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return x[-1] + y[x.shape[0] - 1], x[1:] - x[:-1], x.unsqueeze(0).repeat(2, 1, 1)


def window(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The last three rows (a sliding window: torch's Max(0, s - 3)) and a narrowed copy."""
    start = max(x.shape[0] - 3, 0)
    return x[-3:] * 2, y[start:] + x[start:]


def extremes(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return x.argmax(0), x.max(dim=0).values, x.topk(2, dim=1).values


@pytest.mark.parametrize("fn", [causal_scores, tril_mask, cat_and_split, along_the_length, last_and_steps, window,
                                extremes],
                         ids=lambda fn: fn.__name__)
def test_ops_over_a_symbolic_length_match_eager(fn) -> None:
    fast = torch.compile(fn, backend="luminal_lab", options=FAST)
    for length in (3, 5, 8):
        x, y = _randn(length, 8, seed=length), _randn(length, 8, seed=length + 1)
        torch.testing.assert_close(fast(x, y), fn(x, y), **TOL)
    programs = ll.programs(fast)
    assert len(programs) == 2 and "symbolic s" in programs[-1].hlir.summary()


def test_gpt2_generates_with_the_cache_in_two_programs() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=96, n_embd=32, n_layer=1, n_head=4, n_positions=32,
                                     bos_token_id=0, eos_token_id=None, pad_token_id=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(1, 96, (1, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model.generate(ids, max_new_tokens=12, do_sample=False)
        model.forward = torch.compile(model.forward, backend="luminal_lab", options=FAST)
        got = model.generate(ids, max_new_tokens=12, do_sample=False)
    assert torch.equal(got, expected)
    # the prefill, then one program for every cache length: the first decode step, a static recompile whose cache
    # length dynamo has seen once, ran in torch, and the second made that length dynamic
    prefill, decode = ll.programs(model.forward)
    assert "symbolic" not in prefill.hlir.summary() and "symbolic s" in decode.hlir.summary()


def test_a_compiled_bound_forward_finds_its_programs() -> None:
    model = Scores()
    model.forward = torch.compile(model.forward, backend="luminal_lab", options=FAST)  # as for model.generate
    for length in LENGTHS:
        x = _randn(length, 8, seed=length)
        torch.testing.assert_close(model(x), Scores.forward(model, x), **TOL)
    assert len(ll.programs(model.forward)) == 2


def pooled(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.max_pool2d(x, 2).relu()


def test_a_graph_whose_sizes_cannot_stay_symbolic_is_compiled_per_shape() -> None:
    """Pooling needs its window count as a number: the dynamic graph dynamo hands over after a second size is compiled
    per input shape, with a warning that says why, and every output still equals eager's."""
    fast = torch.compile(pooled, backend="luminal_lab", options=FAST)
    for size in (8, 10):  # the second size is a recompile, which runs in torch once
        x = _randn(1, 2, size, size, seed=size)
        torch.testing.assert_close(fast(x), pooled(x), **TOL)
    with pytest.warns(UserWarning, match="cannot stay symbolic .*compiled per input shape instead"):
        x = _randn(1, 2, 12, 12, seed=12)
        torch.testing.assert_close(fast(x), pooled(x), **TOL)
    for size in (10, 6):
        x = _randn(1, 2, size, size, seed=size)
        torch.testing.assert_close(fast(x), pooled(x), **TOL)
    assert len(ll.programs(fast)) == 4  # 8 (static), then 12, 10 and 6, each its own


def test_plans_of_every_length_share_the_weights_and_one_arena() -> None:
    """A weight is copied in once per runtime, not once per binding, and every plan reads the same memory; the
    buffers each run rewrites are carved from one arena, so lengths taken in turn (as a generation's steps, then a
    second generation) each still compute their own result."""
    model = Scores()
    comp = ll.compile(model, (_randn(5, 8),), dynamic_shapes=({0: torch.export.Dim.AUTO},))
    for length in (3, 9, 3, 17, 9):
        x = _randn(length, 8, seed=length)
        torch.testing.assert_close(comp(x), model(x), **TOL)
    (runtime,) = comp._runtimes.values()
    plans = list(runtime.plans.values())
    assert len(plans) == 3
    for name in comp.graph.weights:
        (slot,) = {id(s): s for plan in plans for s in plan.weights if s.name == name}.values()
        assert all(any(s is slot for s in plan.weights) for plan in plans)
    carved = [buffer for plan in plans for buffer in plan.buffers.values() if np.shares_memory(buffer, runtime._arena)]
    assert len(carved) >= 3 * 2  # each plan's input and kernels' outputs


def rms_scaled(x: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * eps


def test_a_float_dynamo_passes_as_a_tensor_is_baked_into_its_program() -> None:
    """With ``dynamic=True`` dynamo passes a float argument as a 0-d tensor read with ``.item()``; each program bakes
    its value in, and another value gets another program (dynamo does not guard on it)."""
    fast = torch.compile(rms_scaled, backend="luminal_lab", options=FAST, dynamic=True)
    for length, eps in ((5, 1e-5), (7, 1e-5), (9, 0.5), (11, 0.5), (4, 1e-5)):
        x = _randn(3, length, seed=length)
        torch.testing.assert_close(fast(x, eps), rms_scaled(x, eps), **TOL)
    programs = ll.programs(fast)
    assert len(programs) == 2
    assert all("symbolic s" in program.hlir.summary() for program in programs)
