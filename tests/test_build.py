"""The project's own build prints no deprecation banner on a newcomer's first screen
(`make demo`, `make test` install mnistconv the way this test does)."""

import re
import subprocess
import sys

import pytest

from helpers import REPO


def _makefile_install_command():
    """The pip command `make install` runs, as make expands it."""
    dry = subprocess.run(["make", "-n", "-B", "-C", str(REPO), "VENV=/nonexistent-venv",
                          "/nonexistent-venv/.installed"], capture_output=True, text=True)
    lines = [l for l in dry.stdout.splitlines() if "pip install" in l and "-e" in l]
    assert lines, dry.stdout + dry.stderr
    return lines[0]


def test_editable_install_prints_no_deprecation(tmp_path):
    command = _makefile_install_command()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # The same command with this venv, without the dependencies (they are not the
    # project's build) and without -q, so that anything the build says is seen.
    command = command.replace("/nonexistent-venv/bin/python", str(venv / "bin" / "python"))
    command = command.replace(" -q ", " --no-deps ").replace("'.[tfrecord]'", ".")
    result = subprocess.run(command, shell=True, cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    if result.returncode and "Could not find a version" in result.stderr:
        pytest.skip("no package index for the build requirements")
    assert result.returncode == 0, result.stderr
    said = result.stdout + result.stderr
    # This machine's pip configuration warns about its own index locations; that is
    # not the project's build.
    said = "\n".join(l for l in said.splitlines() if "is ignored: it is neither" not in l)
    assert not re.search(r"deprecat|transitional|Warning", said, re.I), said


def test_every_module_imports_first_in_a_fresh_interpreter():
    """`import mnistconv.formats.parquet.reader` as a program's first import once failed
    (a sibling import went through the format package's lazy names into its half-
    imported code module): every module must import alone."""
    import concurrent.futures
    import pkgutil
    import subprocess
    import sys

    import mnistconv
    names = [m.name for m in pkgutil.walk_packages(mnistconv.__path__, "mnistconv.")
             if not m.name.endswith("__main__")]
    assert "mnistconv.formats.parquet.reader" in names

    def attempt(name):
        r = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True)
        return name, r.returncode, r.stderr.decode()[-300:]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        failed = [r for r in pool.map(attempt, names) if r[1] != 0]
    assert failed == []


def test_make_demo_ends_with_the_line_that_puts_mnistconv_on_path(tmp_path):
    # A venv of wrappers around the one running the tests, its install stamps newer
    # than pyproject.toml, so `make demo` runs the demo and installs nothing.
    import os
    import shutil
    if shutil.which("make") is None:
        pytest.skip("needs GNU make")
    venv = tmp_path / "venv"  # (make cannot take a path with spaces)
    (venv / "bin").mkdir(parents=True)
    for name, target in (("python", sys.executable),
                         ("mnistconv", os.path.join(os.path.dirname(sys.executable),
                                                    "mnistconv"))):
        wrapper = venv / "bin" / name
        wrapper.write_text(f'#!/bin/sh\nexec "{target}" "$@"\n')
        wrapper.chmod(0o755)
    (venv / ".installed").touch()
    result = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), f"VENV={venv}",
                             f"DEMO_OUT={tmp_path / 'demo-out'}", "demo"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    last = result.stdout.rstrip("\n").splitlines()[-1]
    assert last == f'export PATH="{venv}/bin:$PATH"'
    # Pasted into a shell, it finds the venv's mnistconv first.
    found = subprocess.run(["sh", "-c", f"{last}; command -v mnistconv"],
                           capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert found.stdout.strip() == str(venv / "bin" / "mnistconv")
