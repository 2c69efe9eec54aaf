"""The browser half of the workbench widget and the HTML report, kept as files in ``static/``.

``provenance.js`` / ``provenance.css`` are shared (finding the clicked node, marking the
highlighted nodes and CUDA lines); ``workbench.*`` and ``report.*`` are each one's own part.
"""

from __future__ import annotations

import functools
from importlib.resources import files

NO_PICTURE = "No picture: Graphviz's dot is not installed or could not draw this stage."


@functools.cache
def asset(*names: str) -> str:
    """The text of the files ``names`` in ``static/``, joined in order."""
    return "".join((files(__package__) / "static" / name).read_text(encoding="utf-8") for name in names)
