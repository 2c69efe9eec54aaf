"""``ll.RayRunner`` on a local Ray cluster (two CPUs, on the loopback): a search measured by Ray actors, with the
same history and outcomes as the local runner's, each candidate naming its worker; crashes and hangs recorded."""

from __future__ import annotations

import os
import sys

import pytest

import luminal_lab as ll
from luminal_lab.search.runners import RayRunner
from tests.helpers.sabotage import Crash, Hang, sabotaged

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before Ray's import: one machine, every server on the loopback
ray = pytest.importorskip("ray", reason="Ray is the optional extra luminal_lab[ray], which make setup installs")


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def comp():
    g = ll.Graph()
    a, b = g.tensor((64, 64), "a"), g.tensor((64, 64), "b")
    ((a @ b).softmax(-1) * 2.0).output("y")
    compiled = ll.compile(g)
    yield compiled
    compiled.egraph.close()


def test_the_cluster_listens_on_the_loopback_only(cluster) -> None:
    assert [node["NodeManagerAddress"] for node in cluster.nodes()] == ["127.0.0.1"]


def test_a_search_measured_by_ray_actors(cluster, comp, tmp_path) -> None:
    comp.records = ll.TuningRecords(tmp_path)
    runner = RayRunner()
    try:
        result = comp.search(generations=1, generation_size=4, trials=2, progress=False, runner=runner)
    finally:
        runner.close()
    assert result.best.outcome == "ok" and comp.genome.hash == result.best.hash
    assert {c.outcome for c in result.history} <= {"ok", "slow", "refused"}
    assert all(" ray pid " in c.worker for c in result.history if c.outcome != "refused")
    assert [row["outcome"] for row in comp.tuning_records()] == [c.outcome for c in result.history]
    timed = [c for c in result.history if c.outcome == "ok"]
    assert all(c.kernel_seconds and all(isinstance(k, int) for k in c.kernel_seconds) for c in timed)


def test_a_crashed_or_hung_ray_worker_is_recorded_and_replaced(cluster, comp) -> None:
    runner = RayRunner(timeout=10)
    try:
        arrays, bindings = comp._profiling_inputs(None, "test")
        reference = comp._reference.run(arrays, bindings)
        runner.start(ll.search.Job("cpu", arrays, {}, bindings, [reference[n] for n in comp.graph.outputs], 2))
        llir = comp.llir(comp.choice_space().fused_genome())
        crashed, hung, fine = runner.measure_all([sabotaged(llir, Crash()), sabotaged(llir, Hang(120)), llir],
                                                 lambda: None, None)
        assert crashed.outcome == "error" and crashed.reason.startswith("its Ray worker died")
        assert hung.outcome == "timeout" and hung.reason.startswith("no result within the 10 s time limit")
        assert fine.outcome == "ok" and " ray pid " in fine.worker and runner.restarts == 2
    finally:
        runner.close()


def test_without_ray_the_runner_says_how_to_install_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ll.LuminalError, match=r"^RayRunner needs Ray, an optional extra: pip install "
                                              r"'luminal_lab\[ray\]'"):
        RayRunner()
