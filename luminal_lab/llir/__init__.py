"""The LLIR: genomes pick one e-node per e-class, and extraction turns a genome into a kernel graph.

``genome`` (``ChoiceSpace``, ``Genome``, ``extract``), ``llir`` (``Kernel``, ``LLIR``),
``regions`` (fused regions of an LLIR and the position-named body each runs), and their views
``view`` and ``regions_view``.
"""

from .genome import ChoiceSpace, Genome, extract
from .llir import LLIR, Kernel
from .regions import Region, RegionBody, Regions, find_regions

__all__ = ["LLIR", "ChoiceSpace", "Genome", "Kernel", "Region", "RegionBody", "Regions", "extract",
           "find_regions"]
