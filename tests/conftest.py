"""Session-wide test setup, and the fixtures tests in several folders share."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hypothesis import settings

from luminal_lab.compiler import background
from luminal_lab.runtime.cache import CACHE_ENV, WORKERS_ENV
from luminal_lab.search.records import CACHE_ENV as GENOME_CACHE_ENV
from tests.helpers.fused import Fused, compile_fused

# No per-example deadline: on a loaded 2-core machine a first example once took 768 ms (a 0.1 ms check) and hypothesis
# failed it as flaky; speed is measured in benchmarks/, not in tests.
settings.register_profile("luminal_lab", deadline=None)
settings.load_profile("luminal_lab")


@pytest.fixture(scope="session", autouse=True)
def kernel_directory(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Compiled kernels go to ``$LUMINAL_LAB_KERNEL_CACHE`` when set, else to pytest's cache
    directory (warm on the next run), never to the user's home."""
    if os.environ.get(CACHE_ENV):
        yield Path(os.environ[CACHE_ENV])
        return
    cache = request.config.cache
    directory = cache.mkdir("luminal_lab_kernels") if cache is not None else tmp_path_factory.mktemp("kernels")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(directory))
        yield directory


@pytest.fixture(scope="session", autouse=True)
def compile_in_process() -> Iterator[None]:
    """Kernels compile in the test process: the suite runs on every core already (pytest-xdist), and counts what
    each test compiles. The worker processes are tested on their own (runtime/test_cpu.py)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(WORKERS_ENV, "1")
        yield


@pytest.fixture(scope="session", autouse=True)
def genome_directory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The best genomes the torch.compile backend caches go to a fresh directory of this session (so each session's
    backend searches as a new user's would), never to the user's home."""
    directory = tmp_path_factory.mktemp("genomes")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(GENOME_CACHE_ENV, str(directory))
        yield directory


@pytest.fixture
def fresh_dynamo() -> Iterator[None]:
    """Dynamo's caches emptied before and after the test, so each ``torch.compile`` of it compiles anew."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture(autouse=True)
def no_search_outlives_its_test() -> Iterator[None]:
    """A search the backend runs behind a program's calls (its default) is stopped when the test that started it ends,
    so that it neither races nor slows the next test."""
    yield
    background.stop_all()


@pytest.fixture(scope="module")
def fused() -> Iterator[Fused]:
    """``sin_sqrt_sum`` compiled with its most fused genome (tests/helpers/fused.py), one per test module
    (compiler/test_provenance.py, notebook/test_report.py, notebook/test_workbench.py)."""
    yield from compile_fused()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the ``summary`` property that tests record (``record_property("summary", ...)``: coverage counts),
    which reaches this process from xdist's workers with each test's report."""
    lines = [value for reports in terminalreporter.stats.values() for report in reports
             if getattr(report, "when", None) == "call"
             for name, value in report.user_properties if name == "summary"]
    if lines:
        terminalreporter.section("summaries")
        for line in lines:
            terminalreporter.write_line(line)
