"""mptool's version (kept here, below every layer, so that any module can name it without importing
the package's lazy API)."""

__version__ = "0.1.0"
