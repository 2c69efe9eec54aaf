"""Measured search over genomes: candidates extracted, run, checked against the reference, and timed."""

from .search import OUTCOMES, Candidate, SearchResult, random_inputs, search

__all__ = ["OUTCOMES", "Candidate", "SearchResult", "random_inputs", "search"]
