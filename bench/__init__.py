"""Flux benchmark suite (tracker issue 7): ``python -m bench [--quick] [--only B1,B2]``.

Every figure is measured against real processes (a server and workers started by
``flux.local.LocalCluster``) or the pure cores (runtime replay, placement), and is
reported as a median and a p95 (``statistics.quantiles``), never a mean. Figures are
recorded, not asserted: each carries its aim and whether this run met it.
"""
