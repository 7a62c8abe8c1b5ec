"""One plug-in registry: named items, filled by a loader on the first look-up.

Training balancers, MoE systems and scenario kinds are each kept in one of these. The loader
(imports the shipped modules, then the entry points of the registry's group) is given the
registry to fill and runs once, the first time the registry is read or written, so importing
a registry stays cheap. The first look-up may come from several threads at once (scenarios
loaded from a thread pool): the others wait until the loader has finished, and only the
loader's own thread (whose modules register themselves while it runs) reads it half-filled.
A name registered twice with another object is a programming error unless the registry lets a
later registration replace an earlier one (``replace``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from typing import Any, Generic, Protocol, TypeVar

from libra_des.errors import InputError


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


class Registry(Generic[T]):
    """Items by name, in registration order; ``field`` is what an unknown name is bad input for."""

    def __init__(
        self, what: str, field: str, load: Callable[[Registry[T]], None], replace: bool = False
    ) -> None:
        self.what = what
        self.field = field
        self.replace = replace
        self._load_items = load
        self._items: dict[str, T] = {}
        self._loaded = False
        self._loading = False
        self._lock = threading.RLock()

    def register(self, item: T) -> T:
        self._load()  # shipped items keep their places ahead of any newcomer
        known = self._items.get(item.name)
        if known is not None and known is not item and not self.replace:
            raise ValueError(f"{self.what} {item.name!r} is registered twice")
        self._items[item.name] = item
        return item

    def names(self) -> tuple[str, ...]:
        self._load()
        return tuple(self._items)

    def items(self) -> tuple[T, ...]:
        self._load()
        return tuple(self._items.values())

    def get(self, name: Any) -> T:
        """The item called ``name``; an unknown name is bad input naming :attr:`field`."""
        self._load()
        if not isinstance(name, str) or name not in self._items:
            raise InputError(self.field, name, " | ".join(self.names()))
        return self._items[name]

    def _load(self) -> None:
        if self._loaded:
            return
        with self._lock:  # another thread's first look-up waits for the whole load
            if self._loaded or self._loading:
                return  # loaded meanwhile, or this thread's loader registering its items
            self._loading = True
            try:
                self._load_items(self)
                self._loaded = True
            finally:
                self._loading = False


def shipped_then_entry_points(
    shipped: Callable[[], Iterable[T]], group: str, kind: type[T]
) -> Callable[[Registry[T]], None]:
    """The usual loader: the ``shipped`` items in order, then every entry point of ``group``
    that loads a ``kind`` (loading one may also register itself, as a plug-in module does)."""

    def load(registry: Registry[T]) -> None:
        for item in shipped():
            registry.register(item)
        for point in entry_points(group=group):
            loaded = point.load()
            if isinstance(loaded, kind):
                registry.register(loaded)

    return load
