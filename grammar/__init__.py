"""The ptodsl grammar, shipped as package data."""

import re
from importlib.resources import files

GRAMMAR_TEXT = files(__name__).joinpath("ptodsl.lark").read_text(encoding="utf-8")

# The words the grammar reserves (`kernel`, `state`, `end`, `true`, ...): never a name.
KEYWORDS = frozenset(re.findall(r'"([a-z]+)"', GRAMMAR_TEXT))
