"""JSON-ready values of ptodsl's reports (check, coverage, tune), through one cattrs converter.

Its hooks are ptodsl's only JSON rules: a float that is not finite becomes null (JSON has no
inf or nan; the report's verdict says why), a path becomes its text, and a report class may
add properties (an output's `ok`) to its fields.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cattrs
from cattrs.gen import make_dict_unstructure_fn

CONVERTER = cattrs.Converter()
CONVERTER.register_unstructure_hook(float, lambda value: value if math.isfinite(value) else None)
CONVERTER.register_unstructure_hook(Path, str)


def to_json(value: Any) -> Any:
    """`value` (attrs instances, and containers of them) as dicts, lists and JSON scalars."""
    return CONVERTER.unstructure(value)


def with_properties(*names: str) -> Callable[[type], type]:
    """Class decorator: `to_json` of an instance also gives its properties `names`."""

    def register(cls: type) -> type:
        # built at first use: a class whose fields name it (a report holding its eval-mode
        # report) is not defined yet while it is decorated
        fields = functools.cache(lambda: make_dict_unstructure_fn(cls, CONVERTER))
        CONVERTER.register_unstructure_hook_func(
            lambda kind: kind is cls,
            lambda value: fields()(value) | {name: to_json(getattr(value, name)) for name in names},
        )
        return cls

    return register
