"""One module per provider mode of the sandbox; ``DIALECTS`` maps a mode to it, as each
provider kind's registry entry names it (``Kind.sandbox_dialect``)."""

from __future__ import annotations

import importlib
from typing import cast

from services.sandbox.modes import Dialect
from shared.providers.registry import KINDS

DIALECTS: dict[str, Dialect] = {
    kind.name: cast(Dialect, importlib.import_module(kind.sandbox_dialect).DIALECT)
    for kind in KINDS.values()
    if kind.sandbox_dialect
}
