"""ptodsl: compile compact op specs into executable PyPTO kernels."""

__version__ = "0.1.0"

from ptodsl.api import Compiled, check, compile, tune  # noqa: E402 - after __version__ (codegen)
from ptodsl.frontend.diagnostics import SpecError  # noqa: E402

__all__ = ["Compiled", "SpecError", "__version__", "check", "compile", "tune"]
