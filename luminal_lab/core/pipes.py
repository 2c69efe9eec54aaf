"""Messages between this process and a worker it started (the egglog worker, the search's measuring process):
each message is pickled and sent with its length in front. Both ends are this library's own code in processes this
process started, over their pipes; nothing read from disk or another machine goes through here. ``reap`` ends such a
worker."""

from __future__ import annotations

import pickle
import struct
import subprocess
from typing import Any

_HEADER = struct.Struct("!Q")


def send(stream, message: Any) -> None:
    """Write ``message`` to ``stream`` (a binary pipe) and flush it."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exactly(stream, count: int) -> bytes:
    chunks, remaining = [], count
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            raise EOFError("the worker closed its pipe")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def receive(stream) -> Any:
    """The next message on ``stream``; ``EOFError`` when the other end closed it (or died)."""
    (length,) = _HEADER.unpack(_read_exactly(stream, _HEADER.size))
    return pickle.loads(_read_exactly(stream, length))


def reap(process: subprocess.Popen) -> None:
    """Kill ``process`` (if it runs), wait for it and close its pipes."""
    if process.poll() is None:
        process.kill()
    process.wait()
    for stream in (process.stdin, process.stdout):
        stream.close()
