"""A light stand-in for ``typing.NamedTuple`` on the start-up path.

Same class syntax (annotated fields, defaults, docstring, methods), same result (a
``collections.namedtuple`` subclass: immutable, ``_fields``, ``_replace``, ``_asdict``),
without importing ``typing``, which with what it pulls in (contextlib, functools' and
re's extras) cost 11-15 ms of a 40 ms start-up budget in the images (``python -X
importtime``, 2-CPU VM). Type checkers see ``typing.NamedTuple`` instead:

    TYPE_CHECKING = False
    if TYPE_CHECKING:
        from typing import NamedTuple
    else:
        from probes._record import NamedTuple

Modules using it must have ``from __future__ import annotations`` (fields are read from
the class's ``__annotations__`` without evaluating them). Raises TypeError when a field
without a default follows one with a default, as typing.NamedTuple does.
"""
from __future__ import annotations

from collections import namedtuple


class _Meta(type):
    def __new__(mcls, name, bases, ns):  # type: ignore[no-untyped-def]
        if not bases:  # NamedTuple itself
            return super().__new__(mcls, name, bases, ns)
        if "__annotations__" not in ns:
            raise TypeError(f"{name}: record classes need `from __future__ import annotations`")
        fields = list(ns["__annotations__"])
        defaults = [ns[f] for f in fields if f in ns]
        with_default = [f in ns for f in fields]
        if with_default != sorted(with_default):
            raise TypeError(f"{name}: a field without a default follows one with a default")
        base = namedtuple(name, fields, defaults=defaults, module=ns.get("__module__"))  # type: ignore[misc]
        attrs = {k: v for k, v in ns.items() if k not in fields}
        attrs["__slots__"] = ()
        return type(name, (base,), attrs)


class NamedTuple(metaclass=_Meta):
    """Subclass with annotated fields to get a named tuple (see the module docstring)."""
