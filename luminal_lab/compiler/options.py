"""The ``torch.compile`` backend's options (``torch.compile(model, backend="luminal_lab", options={...})``), checked
by name (``compiler.dynamo``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..core.arguments import fail, flag, integer, one_of, seconds
from ..core.errors import ArgumentError
from ..runtime import DEVICES


@dataclass(frozen=True)
class BackendOptions:
    """The backend's ``options``: the search each new program gets (``generations`` of ``generation_size`` children,
    within ``budget`` seconds, from ``seed``; ``generations=0``: the most-fused genome, unmeasured), which goes on
    behind the program's calls unless ``background`` is False (then the first call waits for it, and the budget counts
    the build of the most-fused genome's kernels, which running it needs anyway: a program whose build takes all of it
    runs that genome unmeasured too), the ``device``
    (``None``: the inputs' device), ``fusion`` (whether the e-graph offers fused regions), ``rolling`` (whether
    repeated layers are rolled to one, ``luminal_lab.hlir.rolling``) and ``cache_dir`` (the directory of the tuning
    records, ``search.records``; ``None``: the default directory, ``False``: none kept or read); with ``strict``, a
    graph that cannot be compiled (an op without a translation, say) raises, where by default it runs in torch, with
    a warning that says why."""

    generations: int = 2
    generation_size: int = 8
    budget: float = 5.0
    seed: int = 0
    background: bool = True
    device: str | None = None
    fusion: bool = True
    rolling: bool = True
    cache_dir: Any = None
    strict: bool = False

    @classmethod
    def of(cls, options: Mapping[str, Any] | None) -> BackendOptions:
        """Checked options: an unknown name is a ``TypeError``, a bad value an ``ArgumentError``, each naming it."""
        options = dict(options or {})
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise ArgumentError(f"torch.compile options: unknown option(s) {unknown} for backend 'luminal_lab'; the "
                                f"options are {names}")
        made = cls(**options)
        where = "torch.compile options"
        for name, low in (("generations", 0), ("generation_size", 1), ("seed", 0)):
            integer(where, name, getattr(made, name), minimum=low)
        seconds(where, "budget", made.budget)
        if made.device is not None:
            one_of(where, "device", made.device, DEVICES)
        flag(where, "background", made.background)
        flag(where, "fusion", made.fusion)
        flag(where, "rolling", made.rolling)
        flag(where, "strict", made.strict)
        if made.cache_dir is not None and made.cache_dir is not False \
                and not isinstance(made.cache_dir, (str, os.PathLike)):
            fail(where, "cache_dir", made.cache_dir, "a directory, None (the default) or False")
        return made
