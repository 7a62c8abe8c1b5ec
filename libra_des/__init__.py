"""libra-des: a discrete-event GPU-cluster simulator for the Libra papers.

Layers (imports point downwards only): ``cli`` -> ``sim`` -> ``plan`` / ``hardware``
-> ``workload`` -> ``config``. See ``docs/architecture.md``.
"""

__version__ = "0.1.0"

from libra_des.tables import load_sweep  # pandas is imported only when it is called

__all__ = ["__version__", "load_sweep"]
