"""Where luminal_lab keeps what later processes start from, and how an entry there is written and read back.

``$LUMINAL_LAB_GENOME_CACHE`` (else ``~/.cache/luminal_lab``) holds the tuning records (``search.records``) and the
saturated e-graphs (``egraph.saved``). ``write_json`` writes an entry whole or not at all (a temporary file renamed
over it, so a concurrent reader sees the old entry or the new one); ``read_json`` reads one back as data (JSON, never
a pickle): None where it is missing, and where it does not parse (cut short, overwritten), after removing it.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

CACHE_ENV = "LUMINAL_LAB_GENOME_CACHE"


def default_directory() -> Path:
    """``$LUMINAL_LAB_GENOME_CACHE``, else ``~/.cache/luminal_lab``."""
    return Path(os.environ.get(CACHE_ENV) or "~/.cache/luminal_lab").expanduser()


def directory_of(given: str | os.PathLike | None) -> Path:
    """The directory ``given`` (``~`` expanded), else the default one."""
    return Path(given).expanduser() if given is not None else default_directory()


def write_json(path: Path, data: Any) -> bool:
    """Write ``data`` as JSON to ``path``, whole; False (nothing written) where the directory cannot be written or
    ``data`` is not JSON."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    except OSError:
        return False
    try:
        with os.fdopen(handle, "w") as file:
            json.dump(data, file)
        os.replace(partial, path)
    except (OSError, TypeError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(partial)
        return False
    return True


def read_json(path: Path) -> Any:
    """The JSON data in ``path``; None where there is none, or where what is there does not parse (then removed)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        with contextlib.suppress(OSError):
            path.unlink()
        return None
