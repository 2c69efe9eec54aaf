"""Measured search over genomes: candidates extracted, built and measured by a runner (checked against the
reference, timed), and every measurement kept in the tuning records."""

from .runners import InProcessRunner, Job, LocalRunner, RayRunner, Runner, default_runner
from .search import OUTCOMES, Candidate, Measurement, SearchResult, random_inputs, search

__all__ = ["OUTCOMES", "Candidate", "InProcessRunner", "Job", "LocalRunner", "Measurement", "RayRunner", "Runner",
           "SearchResult", "default_runner", "random_inputs", "search"]
