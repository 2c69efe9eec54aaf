"""The caches every process of a user shares (compiled kernels, tuning records), under what users do to them: two
processes compiling and searching the same program at once, and cache directories this process cannot write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from luminal_lab.runtime.cache import CACHE_ENV as KERNELS_ENV
from luminal_lab.runtime.cache import WORKERS_ENV
from luminal_lab.search.records import CACHE_ENV as RECORDS_ENV
from luminal_lab.search.records import TuningRecords
from tests.helpers.read_only import read_only

ROOT = Path(__file__).resolve().parents[2]

# compile an MLP, search it (measured, so the search is recorded) and run it against torch; answer in one JSON line
SEARCH = textwrap.dedent("""
    import json, sys
    import torch
    sys.path.insert(0, sys.argv[1])
    import luminal_lab as ll
    from tests.helpers.models import MLP, mlp_inputs
    model, inputs = MLP().eval(), mlp_inputs()
    comp = ll.compile(model, inputs)
    result = comp.search(generations=1, generation_size=4, seed=int(sys.argv[2]), progress=False)
    with torch.no_grad():
        close = torch.allclose(comp.run(*inputs), model(*inputs), atol=1e-5, rtol=1e-4)
    print(json.dumps({"close": close, "searched": len(result.history), "key": comp.records_key}))
""")


def _start(kernels: Path, records: Path, seed: int) -> subprocess.Popen:
    env = dict(os.environ, **{KERNELS_ENV: str(kernels), RECORDS_ENV: str(records), WORKERS_ENV: "1"})
    return subprocess.Popen([sys.executable, "-c", SEARCH, str(ROOT), str(seed)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _answer(process: subprocess.Popen) -> tuple[dict, str]:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1]), err


def test_two_processes_compile_and_search_the_same_program_at_once(tmp_path: Path) -> None:
    kernels, records = tmp_path / "kernels", tmp_path / "records"
    answers = [_answer(process) for process in [_start(kernels, records, seed) for seed in (1, 2)]]
    (first, _), (second, _) = answers
    assert first["close"] and second["close"]
    assert first["key"] == second["key"], "one program: its records share a key"
    assert len(TuningRecords(records).rows(first["key"])) == first["searched"] + second["searched"]
    assert list(kernels.glob("lk_*.py")) and not list(kernels.glob("*.tmp"))
    assert not any("luminal_lab:" in err for _, err in answers), "nothing was damaged, so nothing was discarded"


def test_read_only_cache_directories_compile_search_and_run_without_caching(tmp_path: Path) -> None:
    with read_only(tmp_path / "kernels") as kernels, read_only(tmp_path / "records") as records:
        answer, err = _answer(_start(kernels, records, 1))
        assert not any(kernels.iterdir()) and not any(records.iterdir())
    assert answer["close"] and answer["searched"] >= 4
    warned = [line.split("UserWarning: ", 1)[1] for line in err.splitlines() if "UserWarning: luminal_lab:" in line]
    assert [line.split(" (")[0] for line in warned] == [
        f"luminal_lab: the kernel cache directory {kernels} is not writable",
        f"luminal_lab: the tuning records in {records} cannot be written"], err
