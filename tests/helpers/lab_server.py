"""An isolated JupyterLab server for the end-to-end test (see ``tests/extension/test_lab_e2e.py``).

The server listens on 127.0.0.1 only, on a free port, with a random token. Its config, data,
runtime and workspace directories are fresh temporary ones, so nothing of the user's Jupyter
setup (settings, trusted-notebook database, other extensions) takes part; ``JUPYTER_PATH``
adds just this project's built extension, ``luminal_lab/labextension``, as ``luminal-lab``.
The widgets' lab extensions (anywidget, @jupyter-widgets) and the ``python3`` kernel come from
this environment's ``sys.prefix``, which is always on the path.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LABEXTENSION = ROOT / "luminal_lab" / "labextension"
BIN = Path(sys.executable).parent


class LabError(RuntimeError):
    pass


def labextension() -> Path:
    """The built extension; raises ``LabError`` saying how to build it when it is missing."""
    path = Path(os.environ.get("LUMINAL_LAB_E2E_LABEXTENSION", LABEXTENSION))
    if not (path / "package.json").is_file():
        raise LabError(f"the JupyterLab extension is not built: {path / 'package.json'} is missing; "
                       "run `make setup` (builds extension/)")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Lab:
    """``Lab(home, notebooks).start()``: JupyterLab serving ``notebooks``; ``stop()`` ends its process group."""

    def __init__(self, home: Path, notebooks: Path) -> None:
        self.home = home
        self.notebooks = notebooks
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = home / "lab.log"
        self.process: subprocess.Popen | None = None
        self.started_in: float | None = None
        self._start = 0.0

    @property
    def env(self) -> dict[str, str]:
        """The environment of the server and of ``jupyter`` commands that must see the same data dir."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
        env.update(JUPYTER_CONFIG_DIR=str(self.home / "config"), JUPYTER_DATA_DIR=str(self.home / "data"),
                   JUPYTER_RUNTIME_DIR=str(self.home / "runtime"), JUPYTER_PATH=str(self.home / "path"),
                   JUPYTER_PLATFORM_DIRS="1", IPYTHONDIR=str(self.home / "ipython"),
                   PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONPATH=str(ROOT))
        return env

    def prepare(self) -> None:
        """Make the isolated directories and link the built extension into the path."""
        extension = labextension()
        for name in ("config", "data", "runtime", "workspaces", "path/labextensions", "ipython"):
            (self.home / name).mkdir(parents=True, exist_ok=True)
        # no "get notified about Jupyter news?" toast over the page
        settings = self.home / "config" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
        settings.mkdir(parents=True, exist_ok=True)
        (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
        link = self.home / "path" / "labextensions" / "luminal-lab"
        if not link.exists():
            link.symlink_to(extension, target_is_directory=True)

    def trust(self, notebook: Path) -> None:
        """Sign ``notebook`` in the server's own trust database (``jupyter trust``)."""
        subprocess.run([str(BIN / "jupyter"), "trust", str(notebook)], env=self.env, check=True,
                       capture_output=True, text=True)
        import nbformat
        from nbformat.sign import NotebookNotary

        notary = NotebookNotary(data_dir=str(self.home / "data"))
        if not notary.check_signature(nbformat.read(notebook, as_version=4)):
            raise LabError(f"`jupyter trust {notebook.name}` did not sign it in {self.home / 'data'}")

    def start(self) -> Lab:
        """Launch the server (returns at once; ``wait`` polls until it answers)."""
        self.prepare()
        command = [str(BIN / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
                   "--port-retries=0", f"--ServerApp.token={self.token}", f"--ServerApp.root_dir={self.notebooks}",
                   "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                   f"--LabApp.workspaces_dir={self.home / 'workspaces'}", "--expose-app-in-browser",
                   "--ServerApp.open_browser=False", "--MappingKernelManager.cull_idle_timeout=0"]
        if hasattr(os, "getuid") and os.getuid() == 0:
            command.append("--allow-root")
        self._start = time.perf_counter()
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.notebooks)
        log.close()
        return self

    def api(self, path: str, timeout: float = 5):
        """GET ``/api/<path>`` with the token; the parsed JSON."""
        url = f"{self.base_url}/api/{path}"
        request = urllib.request.Request(url, headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode())

    def wait(self, timeout: float = 60) -> float:
        """Poll ``/api/status`` until the server answers; returns seconds since ``start``."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise LabError(f"JupyterLab exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                self.api("status", timeout=2)
                self.started_in = time.perf_counter() - self._start
                return self.started_in
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                time.sleep(0.2)
        raise LabError(f"JupyterLab did not answer on {self.base_url} within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no server log)"
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        """Shut the server's whole process group down (kernels included): TERM, then KILL."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        try:  # kernels run in sessions of their own: ask the server to shut them down first
            for kernel in self.api("kernels"):
                request = urllib.request.Request(f"{self.base_url}/api/kernels/{kernel['id']}", method="DELETE",
                                                 headers={"Authorization": f"token {self.token}"})
                urllib.request.urlopen(request, timeout=10).close()
        except (urllib.error.URLError, OSError, ValueError):
            pass
        try:
            pgid = os.getpgid(process.pid)
        except ProcessLookupError:
            return
        os.killpg(pgid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            process.wait(timeout=5)
        try:  # kernels the server started are in its group too
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
