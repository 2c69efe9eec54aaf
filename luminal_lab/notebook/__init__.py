"""The notebook workbench: widgets, the HTML report and the magics, over the stages of a compiled program.

``stepper`` (``eg.stepper()``), ``inspector`` (``eg.inspector()``), ``profiler``
(``comp.profiler()``), ``workbench`` (``comp.workbench()``), ``report`` (``comp.report(path)``),
``magic`` (``%luminal``, ``%%luminal``); ``assets`` reads their JavaScript and CSS from ``static/``.
The objects below open these lazily; ``luminal_lab.layers.OPENERS`` lists where.
"""
