"""Paper-style figures (optional: needs matplotlib, the ``figs`` extra).

Only the ``figs`` and ``report`` commands import this subpackage, lazily; nothing in the core
simulator does. :data:`libra_des.figures.catalog.FIGURES` lists every figure.
"""
