"""Light commands never import heavy dependencies: `mnistconv --help` must not pay for
TensorFlow, and idx-to-npz (numpy in, numpy out) must not load TensorFlow, OpenCV, Pillow
or protobuf either. Checked on the real process: a small wrapper runs the command as
`python -m mnistconv` does and lists sys.modules as the process exits. (`-X importtime`
would miss modules loaded through importlib.import_module, which is how the registry
loads format modules.)"""

import gzip
import os
import subprocess
import sys

import numpy as np
import pytest

from helpers import REPO, SAMPLE

HEAVY = ("tensorflow", "keras", "cv2", "PIL", "google.protobuf")

# argv: LISTING then either `-m ARGS...` (mnistconv's command line) or `-c CODE`.
WRAPPER = """
import atexit, os, runpy, sys

def dump(listing=sys.argv[1]):
    with open(listing, "w") as f:
        f.write(" ".join(sorted(sys.modules)))

def leave(code, _exit=os._exit):  # the CLI ends with os._exit, which skips atexit
    dump()
    _exit(code)

atexit.register(dump)
os._exit = leave
if sys.argv[2] == "-m":
    sys.argv = ["mnistconv", *sys.argv[3:]]
    runpy.run_module("mnistconv", run_name="__main__", alter_sys=True)
else:
    exec(sys.argv[3])
"""


def modules_at_exit(tmp_path, *argv):
    """(every module name in sys.modules when the process exited, the CompletedProcess)."""
    listing = tmp_path / "modules.txt"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run([sys.executable, "-c", WRAPPER, str(listing),
                             *map(str, argv)], capture_output=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    return set(listing.read_text().split()), result


def heavy_in(names):
    return sorted(n for n in names for p in HEAVY if n == p or n.startswith(p + "."))


@pytest.mark.parametrize("args", [["--help"], ["idx-to-npz", "--help"]],
                         ids=["mnistconv --help", "idx-to-npz --help"])
def test_help_imports_no_heavy_dependency(tmp_path, args):
    names, result = modules_at_exit(tmp_path, "-m", *args)
    assert b"idx-to-npz" in result.stdout
    assert "mnistconv.cli" in names  # the listing is the command's own process
    assert heavy_in(names) == []


def test_idx_to_npz_imports_no_heavy_dependency(tmp_path):
    out = tmp_path / "sample.npz"
    names, _ = modules_at_exit(tmp_path, "-m", "idx-to-npz", SAMPLE, out)
    assert "mnistconv.formats.idx.format" in names and "mnistconv.formats.npz.format" in names
    assert heavy_in(names) == []
    # ... and it did the whole conversion: the bundled sample's images, byte for byte.
    want = np.frombuffer(gzip.decompress((SAMPLE / "train-images-idx3-ubyte.gz")
                                         .read_bytes()), np.uint8, offset=16)
    with np.load(out) as npz:
        assert sorted(npz.files) == ["x_test", "x_train", "y_test", "y_train"]
        assert np.array_equal(npz["x_train"].reshape(-1), want)


def test_the_check_sees_a_heavy_import(tmp_path):
    """The detector itself catches a module loaded through importlib, as the registry
    loads formats (protobuf: light to import, unlike TensorFlow, so this stays fast)."""
    pytest.importorskip("google.protobuf")
    names, _ = modules_at_exit(tmp_path, "-c",
                               "import importlib; importlib.import_module('google.protobuf')")
    assert "google.protobuf" in heavy_in(names)


def test_version_is_the_installed_one_and_cheap(tmp_path):
    """`mnistconv --version` prints the installed distribution's version without
    looking it up (no importlib.metadata scan) and without importing numpy."""
    from importlib.metadata import version
    names, result = modules_at_exit(tmp_path, "-m", "--version")
    assert result.stdout.decode() == f"mnistconv, version {version('mnistconv')}\n"
    assert "importlib.metadata" not in names and "numpy" not in names
