"""The ptodsl grammar, shipped as package data."""

from importlib.resources import files

GRAMMAR_TEXT = files(__name__).joinpath("ptodsl.lark").read_text(encoding="utf-8")
