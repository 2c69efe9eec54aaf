"""Where an op came from: the user's source line behind an exported node.

``torch.export`` records a stack trace per node; ``user_frame`` takes its innermost frame that is
neither torch's nor luminal_lab's own, as ``file.py:12: the source line``. Every HLIR node a node
becomes carries it in its ``origin`` (with the aten op), and so does an ``UnsupportedOpError``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in [^\n]*(?:\n(?!\s*File ")(?P<code>[^\n]*))?')
_LIBRARY_DIRS = (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
                 str(Path(__file__).resolve().parents[1]) + os.sep)  # luminal_lab itself


def user_frame(node: torch.fx.Node) -> str | None:
    """``file.py:12: the source line`` of the innermost user frame in the node's stack trace."""
    frames = [m for m in _FRAME.finditer(node.meta.get("stack_trace") or "")
              if not os.path.abspath(m["file"]).startswith(_LIBRARY_DIRS)]
    if not frames:
        return None
    last = frames[-1]
    place = f"{os.path.basename(last['file'])}:{last['line']}"
    return f"{place}: {last['code'].strip()}" if last["code"] else place
