"""The library's version: part of every tuning record and of a program's records key (``luminal_lab.__version__``)."""

__version__ = "0.1.0"
