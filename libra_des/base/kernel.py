"""Compiled kernels: the typed decorators every kernel module uses, and where numba caches
what they compile.

``@kernel`` compiles a function with numba (``njit``: no Python objects, the GIL released
while it runs) and returns it typed as the function itself, so mypy checks every call
against the kernel's annotated signature (a kernel is called like the Python function it
was written as). ``@inline_kernel`` is the same for small helpers numba inlines into the
kernels that call them (``inline="always"``, at numba's IR level).

Each kernel is cached on disk in :func:`kernel_folder` (``startup.cache_folder`` and the
digest of :mod:`libra_des.base.kernel_sources`) through a cache object of its own
(:func:`kernel_cache`), where ``cache=True`` would use numba's process-wide settings: numba's
``config.CACHE_DIR``, ``NUMBA_CACHE_DIR`` and its list of cache locators stay as the host set
them. A folder that cannot be written falls through to numba's own locators (next to the
source, else numba's user-wide folder), as numba does for its own folder.

A module that imports these decorators is a kernel module for the cache digest
(``kernel_sources.KERNEL_LINE``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, cast

import numpy as np
import numpy.typing as npt

from libra_des.base import kernel_sources
from libra_des.base.startup import announce_first_compile, cache_folder, numba_target

#: A kernel's parameters and result, kept by the decorators (no ``Any``: a kernel module
#: checked with mypy's ``disallow_any_expr`` sees its kernels' own signatures).
P = ParamSpec("P")
R = TypeVar("R")
#: Array types of kernel signatures, by the dtype a kernel is compiled for (mypy checks
#: callers against them; numba compiles for what it is given).
Floats = npt.NDArray[np.float64]
Float32s = npt.NDArray[np.float32]
Ints = npt.NDArray[np.int64]
Int32s = npt.NDArray[np.int32]
Int16s = npt.NDArray[np.int16]
Bools = npt.NDArray[np.bool_]
#: numba's options for every kernel: nopython mode (``njit``), the GIL released.
KERNEL_OPTIONS: dict[str, Any] = {"nogil": True}


def kernel(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` compiled by numba (:data:`KERNEL_OPTIONS`), cached in :func:`kernel_folder`."""
    return compiled(fn, KERNEL_OPTIONS)


def inline_kernel(fn: Callable[P, R]) -> Callable[P, R]:
    """:func:`kernel`, inlined by numba into every kernel that calls it."""
    return compiled(fn, {**KERNEL_OPTIONS, "inline": "always"})


def intrinsic(fn: Callable[..., Any]) -> Callable[..., Any]:
    """numba's ``intrinsic`` (a function that emits LLVM IR into the kernels that call it),
    typed loosely: it is called without the typing context its definition takes first."""
    numba_target()
    from numba import extending

    made: Callable[..., Any] = extending.intrinsic(fn)
    return made


def compiled(fn: Callable[P, R], options: dict[str, Any]) -> Callable[P, R]:
    """numba's dispatcher for ``fn`` with ``options``, given its disk cache in our folder."""
    dispatcher: Any = numba_target().njit(**options)(fn)
    dispatcher._cache = kernel_cache()(dispatcher.py_func)  # what ``cache=True`` sets up
    return cast("Callable[P, R]", dispatcher)


@cache
def kernel_folder() -> Path:
    """This process's cache folder for the kernels: :func:`startup.cache_folder`'s subfolder
    for these kernel sources (:func:`kernel_sources.digest`; folders of other sources stay).
    Says once per source location, on its first compile into it, that the kernels are being
    compiled."""
    folder = cache_folder() / kernel_sources.digest()
    announce_first_compile(folder, kernel_sources.stamp())
    return folder


@cache
def kernel_cache() -> type:
    """numba's per-function disk cache, located in :func:`kernel_folder` first (the same
    layout numba gives ``NUMBA_CACHE_DIR``: a subfolder per source folder), numba's own
    locators after. Built on first use: numba is imported then."""
    numba_target()
    from numba.core import caching

    class KernelLocator(caching.UserProvidedCacheLocator):
        """numba's user-folder locator with our folder in place of ``config.CACHE_DIR``."""

        def __init__(self, py_func: Callable[..., Any], py_file: str) -> None:
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            # numba's own (unannotated) method, reached through our subclass.
            subfolder = self.get_suitable_cache_subpath(py_file)  # type: ignore[no-untyped-call]
            self._cache_path = os.path.join(kernel_folder(), subfolder)

        @classmethod
        def from_function(cls, py_func: Callable[..., Any], py_file: str) -> Any:
            # numba's own source-file and writable-folder checks, without its CACHE_DIR check.
            return super(  # type: ignore[no-untyped-call]
                caching.UserProvidedCacheLocator, cls).from_function(py_func, py_file)

    class KernelCacheImpl(caching.CompileResultCacheImpl):
        # numba's own attribute, a class-level list (hence no ClassVar).
        _locator_classes = [  # noqa: RUF012
            KernelLocator, *caching.CompileResultCacheImpl._locator_classes]

    class KernelCache(caching.FunctionCache):
        _impl_class = KernelCacheImpl

    return KernelCache
