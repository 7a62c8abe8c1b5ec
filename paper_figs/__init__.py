"""The paper-style figures of libra-des, one module per figure, grouped by paper.

* :mod:`paper_figs.libra_train`: the Libra long-context training paper (docs/model.md part A);
* :mod:`paper_figs.libra_moe`: the Libra MoE prefill paper (docs/model.md part B).

Each figure module declares its scenario grid as data and draws over libra_des's Python API
(:mod:`libra_des.api`) only; :mod:`paper_figs.catalog` lists them for ``libra-des figs``.
matplotlib (the ``figs`` extra) is imported only inside functions. libra_des never imports
this package, except the ``figs`` command, lazily, when it runs.
"""
