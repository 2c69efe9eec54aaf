"""The JupyterLab extension ships prebuilt in the wheel: `pip install` is all a user does."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LABEXT = ROOT / "luminal_lab" / "labextension"
SHARE = "share/jupyter/labextensions/luminal-lab"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built from this checkout (with the extension `make setup` built)."""
    assert (LABEXT / "package.json").is_file(), "the extension is not built: run `make setup` (builds extension/)"
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(ROOT)], check=True, cwd=ROOT)
    (built,) = out.glob("luminal_lab-*.whl")
    return built


def test_wheel_holds_the_built_extension_where_jupyterlab_looks(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        data = next(n.split(SHARE)[0] for n in names if SHARE in n)
        assert data.endswith(".data/data/")
        package = json.loads(archive.read(data + SHARE + "/package.json"))
        install = json.loads(archive.read(data + SHARE + "/install.json"))
        shipped = {n.removeprefix(data + SHARE + "/") for n in names if n.startswith(data + SHARE)}
    assert package["name"] == "luminal-lab"
    build = package["jupyterlab"]["_build"]  # what JupyterLab loads: the module federation entry, a mime extension
    load = build["load"]
    assert build["mimeExtension"] == "./mimeExtension"
    assert load.startswith("static/remoteEntry.") and load in shipped
    assert {"package.json", "install.json"} <= shipped
    assert install == {"packageManager": "python", "packageName": "luminal_lab",
                       "uninstallInstructions": install["uninstallInstructions"]}
    built = {str(p.relative_to(LABEXT)) for p in LABEXT.rglob("*") if p.is_file()}
    assert built <= shipped  # every file of the build, nothing left behind


def test_wheel_holds_every_module_and_the_widgets_browser_files(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    package = ROOT / "luminal_lab"
    sources = {str(p.relative_to(ROOT)) for p in package.rglob("*")
               if p.suffix in (".py", ".js", ".css") and "labextension" not in p.relative_to(package).parts}
    assert "luminal_lab/notebook/static/provenance.js" in sources
    assert sources - names == set()


def test_pip_install_lists_the_extension_enabled(wheel: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    # --ignore-installed: without it pip would uninstall this environment's own luminal_lab first
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed", "--prefix",
                    str(prefix), str(wheel)], check=True)
    share = prefix / "share" / "jupyter"
    assert (share / "labextensions" / "luminal-lab" / "package.json").is_file()
    env = {**os.environ, "JUPYTER_PATH": str(share), "JUPYTER_CONFIG_DIR": str(tmp_path / "config")}
    listing = subprocess.run([str(Path(sys.executable).with_name("jupyter")), "labextension", "list"], env=env,
                             capture_output=True, text=True, check=True)
    text = ANSI.sub("", listing.stdout + listing.stderr)
    section = text.split(str(share / "labextensions"), 1)[1].split("\n/", 1)[0]
    assert re.search(r"luminal-lab v0\.1\.0 enabled\s+OK \(python, luminal_lab\)", section), text
