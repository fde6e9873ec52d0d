"""The examples of README.md and of the documentation site (docs/**/*.md) run as written
and print what the page shows.

Each page is followed like a notebook, in one temporary directory laid out as the
repository is for the bundled sample (`examples/data/mnist-sample`) with the same
sample also at `data/mnist`, so a page's relative paths work and its outputs stay out of
the checkout:

- a ```console block: each `$ command` runs in bash (mnistconv is the checkout's) and
  its stdout and stderr together must be the lines shown after it. `...` alone on a
  line stands for any lines, `...` inside a line for any text, and a time such as
  `in 0.20 s` for any time; output that is JSON is compared as JSON. A command whose
  shown output ends in an `Error:` line must fail, any other must succeed;
- a ```python block runs in the page's namespace; a ```text block right after it is
  what it must print;
- ```sh blocks (set-up, downloads, other machines) are not run, and neither is a block
  right after `<!-- docs-test: skip -->`. `<!-- docs-test: needs MODULE ... -->` before
  a block skips the rest of the page when a module is not installed.

docs/library.md has its own test (test_library_docs.py), which also checks what its
examples print.
"""

import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, SAMPLE

PAGES = [REPO / "README.md"] + sorted(
    p for p in (REPO / "docs").rglob("*.md") if p.name != "library.md")
FENCE = re.compile(r"(?:<!-- docs-test: ([^>]*?) -->\s*\n)?^```(\w*)[^\n]*\n(.*?)^```$",
                   re.S | re.M)
BIN = Path(sys.executable).parent


def blocks(page):
    """(line, language, code, directive, expected output) of a page's runnable blocks."""
    text = page.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        directive, lang, code = m.groups()
        line = text.count("\n", 0, m.start(3)) + 1
        if found and found[-1][1] == "python" and lang == "text" and \
                text[found[-1][5]:m.start()].strip() == "" and found[-1][4] is None:
            found[-1] = found[-1][:4] + (code, found[-1][5])
            continue
        if lang in ("console", "python") and not (directive or "").startswith("skip"):
            found.append((line, lang, code, directive or "", None, m.end()))
    return [b[:5] for b in found]


def _line_pattern(line):
    if line.strip() == "...":
        return r"(?:[^\n]*\n)*?"
    pattern = re.escape(line.rstrip())
    pattern = pattern.replace(re.escape("..."), r"[^\n]*?")
    pattern = re.sub(r"\d+\\\.\d+\\ s\b", r"[\\d.]+\\ s", pattern)
    return pattern + r"[ \t]*\n"


def assert_shows(expected, actual, where):
    """`actual` is what the page shows as `expected` (see the module docstring)."""
    stripped = expected.strip()
    if stripped[:1] in "{[" and stripped:
        try:
            shown = json.loads(stripped)
        except ValueError:
            shown = None
        if shown is not None:
            assert json.loads(actual) == shown, where
            return
    pattern = "".join(_line_pattern(line) for line in expected.splitlines(keepends=True))
    text = "\n".join(line.rstrip() for line in actual.splitlines()) + "\n"
    assert re.fullmatch(pattern, text if actual else ""), \
        f"{where}: printed\n{actual}\nwhich is not what the page shows:\n{expected}"


def _commands(code):
    """(command, expected output) of each `$ ` line of a console block."""
    runs = []
    for line in code.splitlines(keepends=True):
        if line.startswith("$ "):
            runs.append([line[2:].strip(), ""])
        elif runs:
            runs[-1][1] += line
    # A blank line between two commands is layout, not output.
    return [(command, shown.rstrip() + "\n" if shown.strip() else "")
            for command, shown in runs]


def _env():
    # LC_ALL=C: `ls` and `sort` order names the same way on every machine.
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", COLUMNS="100",
               PYTHONPATH=str(REPO), LC_ALL="C")
    for name in ("FSSPEC_S3_ENDPOINT_URL", "MNISTCONV_TEST_PROGRESS"):
        env.pop(name, None)
    return env


def run_page(page, workdir):
    """Run every block of the page in order; return how many ran."""
    namespace = {"__name__": "docs_page"}
    ran = 0
    for line, lang, code, directive, expected in blocks(page):
        where = f"{page.relative_to(REPO)}:{line}"
        if directive.startswith("needs "):
            missing = [m for m in directive.split()[1:]
                       if importlib.util.find_spec(m) is None]
            if missing:
                pytest.skip(f"{where} needs {', '.join(missing)}; ran {ran} blocks before")
        if lang == "console":
            if not (BIN / "mnistconv").exists():  # python run from outside a venv
                pytest.skip(f"{where} needs the mnistconv program beside {sys.executable}: "
                            "pip install -e '.[test]' in that venv")
            for command, shown in _commands(code):
                proc = subprocess.run(["bash", "-c", command + " 2>&1"], cwd=workdir,
                                      env=_env(), capture_output=True, text=True,
                                      timeout=600)
                fails = shown.rstrip().splitlines()[-1:] and \
                    shown.rstrip().splitlines()[-1].startswith("Error:")
                assert (proc.returncode != 0) == bool(fails), \
                    f"{where}: `{command}` exited {proc.returncode}:\n{proc.stdout}"
                assert_shows(shown, proc.stdout, f"{where}: `{command}`")
        else:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, where, "exec"), namespace)
            if expected is not None:
                assert_shows(expected, out.getvalue(), where)
        ran += 1
    return ran


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    shutil.copytree(SAMPLE, tmp_path / "examples" / "data" / "mnist-sample")
    shutil.copytree(SAMPLE, tmp_path / "data" / "mnist")
    monkeypatch.chdir(tmp_path)
    return tmp_path


RUNNABLE = [p for p in PAGES if blocks(p)]


@pytest.mark.parametrize("page", RUNNABLE, ids=[str(p.relative_to(REPO)) for p in RUNNABLE])
def test_page_examples_run_and_print_what_the_page_shows(page, workdir):
    assert run_page(page, workdir) == len(blocks(page))


def test_the_runner_finds_the_examples():
    """The extraction sees the pages' blocks (a broken pattern would run nothing)."""
    readme = blocks(REPO / "README.md")
    assert [lang for _, lang, *_ in readme].count("console") >= 1
    assert sum(len(blocks(p)) for p in PAGES) >= 20


def test_the_matcher_fails_on_other_output():
    assert_shows("a 1.20 s\n...\nz\n", "a 0.31 s\nb\nc\nz\n", "t")
    assert_shows("sha256 c3c8...\n", "sha256 c3c8fa\n", "t")
    assert_shows('{"a": [1, 2]}', '{\n  "a": [1, 2]\n}\n', "t")
    for shown, printed in (("a\nb\n", "a\nc\n"), ("a\n", "a\nb\n"), ("x 3 s\n", "x 4 s\n"),
                           ('{"a": 1}', '{"a": 2}'), ("a\n", "")):
        with pytest.raises(AssertionError):
            assert_shows(shown, printed, "t")
