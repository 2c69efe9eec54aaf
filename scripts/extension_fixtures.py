"""Write the pipeline the extension's unit tests read, ``extension/test/fixtures/pipeline_fused.json``: the stages of
the small fused program of ``tests/helpers/fused.py`` (a region and a plain row sum), with their provenance.

    python scripts/extension_fixtures.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers.fused import compile_fused  # noqa: E402


def main() -> None:
    for fused in compile_fused():
        fused.comp.genome = fused.genome
        path = ROOT / "extension" / "test" / "fixtures" / "pipeline_fused.json"
        path.write_text(json.dumps(fused.comp.pipeline().to_json(), indent=1) + "\n", encoding="utf-8")
        print(path)


if __name__ == "__main__":
    main()
