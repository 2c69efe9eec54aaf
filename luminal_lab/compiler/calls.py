"""How the torch.compile backend calls one program with dynamo's arguments (``compiler.dynamo``).

``Feed`` picks a program's inputs and weights out of dynamo's arguments, handing the runtime a weight again only when
its tensor changed. ``Call`` is the call itself: once the program's ready call for the one signature dynamo's guards
let through exists it takes it (``Ready``), and once that served ``HOT_CALLS`` calls, its native function. A genome
swapped in (a background search ended) retires those: the program's general path runs the new genome, which gets a
ready call and a native function of its own in turn.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

from ..core.arrays import to_numpy
from .compiled import Compiled
from .ready import Ready

# a static program's ready calls before its native function is built (in the background): one called this often is
# hot, and the seconds numba takes over it are paid back in microseconds a call
HOT_CALLS = 64


@dataclass
class Feed:
    """How one program is fed from dynamo's arguments: the positions of its inputs, the position of each of its
    weights by name, and the weights' tensors as last handed over (the tensors, their ``data_ptr()`` and
    ``_version``, in ``weights`` order)."""

    inputs: list[int]
    weights: dict[str, int]
    seen: tuple[list, list, list] = ([], [], [])

    def refresh(self, weights: dict[str, np.ndarray], args: Sequence[Any]) -> None:
        """Put into ``weights`` (the program's graph's) a new array for each weight whose tensor changed since the
        last call, which the runtime then copies in; an unchanged weight keeps its array, so it is not copied. All
        unchanged (every call but the first, outside training) is three passes in C."""
        tensors = [args[position] for position in self.weights.values()]
        pointers, versions = list(map(_DATA_PTR, tensors)), list(map(_VERSION, tensors))
        last = self.seen
        if pointers == last[1] and versions == last[2] and all(map(operator.is_, tensors, last[0])):
            return
        old = zip(*last) if last[0] else itertools.repeat(None)
        for name, tensor, pointer, version, was in zip(self.weights, tensors, pointers, versions, old):
            if was is None or was[0] is not tensor or was[1] != pointer or was[2] != version:
                weights[name] = to_numpy(tensor)  # a CPU tensor's memory, shared; a CUDA one's, copied
        self.seen = (tensors, pointers, versions)


_DATA_PTR = torch.Tensor.data_ptr
_VERSION = operator.attrgetter("_version")


class Call:
    """One program called with dynamo's arguments: its weights refreshed, its inputs picked out (and brought to the
    CPU for the CPU runtime), and its results brought back to the inputs' device ``where``."""

    def __init__(self, program: Compiled, feed: Feed, where: torch.device, device: str) -> None:
        self.program, self.feed, self.where, self.device = program, feed, where, device
        self.weights = program.graph.weights
        self.to_host = device == "cpu" and where.type != "cpu"  # inputs copied to the CPU runtime
        self.in_place = where.type == device == "cpu"  # results stay where they are
        self.ready: Ready | None = None  # the program's ready call of the one signature dynamo's guards let through
        self.static = 0  # calls left that look for it (DynamoProgram sets them for a static program)
        self.static_calls = 0  # what ``static`` starts at, again for a genome swapped in
        self.native: Callable[[Sequence[Any]], Any] | None = None  # the ready call as a native function, once built
        self.building: Future | None = None  # of that function (``Ready.native``)
        self.hot = 0  # ready calls left before it is built

    def __call__(self, args: Sequence[Any]) -> Any:
        feed = self.feed
        if feed.weights:
            feed.refresh(self.weights, args)
        native = self.native
        if native is not None:
            result = native(args)
            if result is not None:
                return result
        ready = self.ready
        if ready is not None and ready.current():
            result = ready(args)
            if result is not None:
                if self.hot:
                    self._heat(ready, args)
                return result
        inputs = [args[position] for position in feed.inputs]
        if self.to_host:
            inputs = [t.cpu() if isinstance(t, torch.Tensor) else t for t in inputs]
        result = self.program.run(*inputs, device=self.device)
        if ready is not None and not ready.current():  # another genome now (a background search ended): its own calls
            self.ready, self.native, self.building, self.hot, self.static = None, None, None, 0, self.static_calls
        if self.static:
            self.static -= 1
            ready = self.program.ready(*inputs)
            if ready is not None:
                self.ready, self.static, self.hot = ready.through(feed.inputs), 0, HOT_CALLS
        if self.in_place:
            return result
        return pytree.tree_map_only(torch.Tensor, lambda t: t.to(self.where) if t.device != self.where else t, result)

    def _heat(self, ready: Ready, args: Sequence[Any]) -> None:
        """Count a ready call: the ``HOT_CALLS``-th starts building its native function in the background, and the
        first after that finds it built takes it from then on."""
        if self.building is not None:
            if self.building.done():
                self.native, self.building, self.hot = self.building.result(), None, 0
            return
        self.hot -= 1
        if self.hot == 0:
            self.building = ready.native(args)
            self.hot = int(self.building is not None)  # the calls after look for it while it builds
