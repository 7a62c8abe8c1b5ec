"""The standard normal CDF and quantile (``ndtr``, ``ndtri``): scipy's own ufuncs, loaded lean.

``import scipy.special`` costs 0.2-0.3 s (its ``__init__`` sets up the array-API backends,
which import numpy.f2py, numpy.testing and numpy.ma), about a third of a short
``libra-des plan`` run (measured with ``python -X importtime``, benchmarks/startup.py). The
two functions we need live in the compiled module ``scipy.special._ufuncs``, whose own import
takes about 20 ms, but importing any submodule runs the package's ``__init__`` first.

:func:`load_ufuncs` therefore imports ``_ufuncs`` under a bare stand-in for the package (its
``__path__`` only) and then removes the stand-in, so that a later ``import scipy.special``
runs the real ``__init__``, which finds and reuses this very module: the objects are the same,
so results are bit-identical by construction (tests/test_lengths.py checks identity). If the
lean route fails in any way (another scipy layout), the ordinary import is used.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

PACKAGE = "scipy.special"


def load_ufuncs() -> Any:
    """``scipy.special._ufuncs`` without running ``scipy/special/__init__.py`` when possible."""
    if PACKAGE in sys.modules:  # already imported in full: nothing to save
        return importlib.import_module(f"{PACKAGE}._ufuncs")
    try:
        return lean_import()
    except Exception:  # any other layout: the ordinary (slower) route gives the same objects
        return importlib.import_module(f"{PACKAGE}._ufuncs")


def lean_import() -> Any:
    """Import the compiled submodule under a stand-in package, then drop the stand-in."""
    scipy = importlib.import_module("scipy")
    stand_in = types.ModuleType(PACKAGE)
    stand_in.__path__ = [f"{scipy.__path__[0]}/special"]
    sys.modules[PACKAGE] = stand_in
    try:
        return importlib.import_module(f"{PACKAGE}._ufuncs")
    finally:
        if sys.modules.get(PACKAGE) is stand_in:
            del sys.modules[PACKAGE]


_UFUNCS = load_ufuncs()
ndtr = _UFUNCS.ndtr
ndtri = _UFUNCS.ndtri
