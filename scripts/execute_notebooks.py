"""Execute notebooks in place with nbclient, keeping their outputs but not their widget state.

    python scripts/execute_notebooks.py [NOTEBOOK ...] [--into DIR]    # default: notebooks/*.ipynb, in place

Each notebook runs headless in a fresh ``python3`` kernel from its own folder; its outputs are
written back (so it reads well on a code host and ``pytest --nbval`` has something to compare),
without ``metadata.widgets`` or per-cell timing metadata. Prints each notebook's wall time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def execute(path: Path, timeout: int, into: Path | None = None) -> float:
    """Run ``path`` and write it back (into the folder ``into`` when given); returns its wall time in seconds."""
    notebook = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(notebook, kernel_name="python3", timeout=timeout, record_timing=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - start
    notebook.metadata.pop("widgets", None)
    nbformat.write(notebook, into / path.name if into else path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook in notebooks/")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed per cell (default 600)")
    parser.add_argument("--into", type=Path, help="write the executed notebooks into this folder (default: in place)")
    args = parser.parse_args(argv)
    for path in args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb")):
        print(f"{path.name}: {execute(path, args.timeout, args.into):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
