"""Every error luminal_lab raises: all subclass ``LuminalError``, most also the built-in exception they refine
(``ShapeError`` is a ``ValueError``, ``DTypeBoundaryError`` and ``DTypeError`` are ``TypeError``s, ``ArgumentError``
is both)."""

from __future__ import annotations


class LuminalError(Exception):
    """Base class of every luminal_lab error."""


class ArgumentError(LuminalError, TypeError, ValueError):
    """A public function got an argument of the wrong type or value. The first line reads
    ``where(name=value): expected ...`` (see ``luminal_lab.core.arguments``)."""


class ShapeError(LuminalError, ValueError):
    """Shapes that do not fit together (the message names both shapes)."""


class UnsupportedOpError(LuminalError, NotImplementedError):
    """An operator the frontend cannot translate; names the op and where it came from."""

    def __init__(self, op: str, where: str | None = None, detail: str | None = None):
        self.op = op
        self.where = where
        message = f"unsupported op {op}"
        if detail:
            message += f" ({detail})"
        if where:
            message += f"\n  from {where}"
        super().__init__(message)


class ExportError(LuminalError):
    """``torch.export`` cannot trace the program: an op whose result depends on the input's values (a Python bool
    or a branch on a tensor); names the op, the user's line and what to do instead."""


class NoEClassError(LuminalError, KeyError):
    """An e-class id (or HLIR node) the e-graph does not have; a ``KeyError`` whose message reads as written."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class DTypeBoundaryError(LuminalError, TypeError):
    """An input whose dtype differs from the graph's declared dtype. Nothing is cast silently."""


class EgglogError(LuminalError):
    """egglog rejected a program or a rule; ``line`` is the offending line of rule text."""

    def __init__(self, message: str, line: str | None = None):
        self.line = line
        super().__init__(message if line is None else f"{message}\n  in: {line}")


class BudgetExceeded(LuminalError):
    """Saturation stopped at a node, row or time budget; the e-graph stays usable."""


class Refused(LuminalError):
    """A genome that extracts no LLIR, or that a device will not run; ``kind`` says why (cycle, dead end, missing
    kernel op, ...), ``eclass`` where that is one e-class's pick (a broken region's end)."""

    def __init__(self, kind: str, detail: str, eclass: str | None = None):
        self.kind, self.detail, self.eclass = kind, detail, eclass
        super().__init__(f"{kind}: {detail}")


class SearchStopped(LuminalError, RuntimeError):
    """A search's ``stop`` event was set before it found a viable genome."""


class NoDeviceError(LuminalError, RuntimeError):
    """A device (e.g. ``"cuda"``) was asked for and none is present."""


class MemoryBudgetError(LuminalError, MemoryError):
    """A plan's buffers would not fit the memory budget, or their allocation failed; the message names the
    largest buffer, what the plan needs in all and the budget. The search records such a genome as refused."""


class DTypeError(LuminalError, TypeError):
    """An op applied to operands of a dtype it does not accept."""


class CudaCompileError(LuminalError):
    """NVRTC or nvcc rejected a source; ``log`` is the compiler's log, ``source`` the program."""

    def __init__(self, log: str, source: str):
        self.log = log
        self.source = source
        super().__init__(f"CUDA compilation failed:\n{log}\n--- source ---\n{source}")
