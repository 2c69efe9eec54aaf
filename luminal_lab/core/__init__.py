"""The vocabulary every stage shares; imports nothing else of luminal_lab.

``dtypes`` (element types and their names in numpy, torch, egglog, C), ``errors`` (every error
class), ``symbolic`` (shape expressions in ``z``), ``shape_tracker`` (views), ``ops`` (the HLIR's
primitive ops and the LLIR's kernel ops), ``tiling`` (a contraction's GPU implementations, as
data), ``stage`` (the ``Stage`` base every stage object
derives from, its JSON envelope and the view module it names), ``ids`` (node ids across stages), ``draw``
(what every picture shares), ``plans`` (plans by binding), ``arrays`` (torch <-> numpy) and ``version``.
"""
