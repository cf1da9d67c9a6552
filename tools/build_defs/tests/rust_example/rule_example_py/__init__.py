"""Python face of the PyO3 example module built by pyo3_extension."""
from ._example import triangle

__all__ = ["triangle"]
