"""libra-des: a discrete-event GPU-cluster simulator for the Libra papers.

Layers (imports point downwards only): ``cli`` -> ``sim`` -> ``plan`` / ``hardware``
-> ``workload`` -> ``config``. See ``docs/architecture.md``.
"""

__version__ = "0.1.0"
