"""The PyTorch frontend: a module or function becomes an HLIR graph (graphs built by hand use ``luminal_lab.hlir``).

``export`` runs ``torch.export`` and decomposes to core aten; ``translate`` walks the exported
graph into a ``Graph`` and its ``Signature`` (a ``TorchProgram``); ``aten`` is the table of
translations, one small function per aten op; ``origins`` finds the user's source line of a node.
"""

from .translate import TorchProgram, from_torch, translate

__all__ = ["TorchProgram", "from_torch", "translate"]
