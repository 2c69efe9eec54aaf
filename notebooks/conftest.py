"""nbval: notebook cells tagged ``gpu`` need a CUDA GPU, and are skipped where there is none."""

from __future__ import annotations

import pytest

from luminal_lab.runtime import cuda_unavailable_reason


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = cuda_unavailable_reason()
    if reason is None:
        return
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is not None and "gpu" in cell.get("metadata", {}).get("tags", []):
            item.add_marker(pytest.mark.skip(reason=f"a cell tagged gpu: {reason}"))
