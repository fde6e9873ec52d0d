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
  right after `<!-- docs-test: skip -->`; the mnistconv commands of ```sh blocks are
  parsed as the command line parses them (every command, option and choice exists). `<!-- docs-test: needs MODULE ... -->` before
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
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from helpers import REPO, SAMPLE, run
from mnistconv.cli import cli

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


# --- ```sh blocks: not run, but every mnistconv command in them is one the CLI takes ----

SH = re.compile(r"^```sh[^\n]*\n(.*?)^```$", re.S | re.M)
SHELL_SEPARATORS = {"|", "||", "&&", ";", "&"}


def sh_commands(page):
    """(line, arguments) of each mnistconv command in a page's ```sh blocks: a line's
    pipes and lists split, its comment dropped."""
    text = page.read_text(encoding="utf-8")
    found = []
    for m in SH.finditer(text):
        first = text.count("\n", 0, m.start(1)) + 1
        for n, line in enumerate(m.group(1).splitlines()):
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            segment = []
            for word in [*lexer, ";"]:
                if word not in SHELL_SEPARATORS:
                    segment.append(word)
                    continue
                if segment[:1] == ["mnistconv"]:
                    found.append((first + n, segment[1:]))
                segment = []
    return found


def parse_as_the_cli_does(args):
    """Parse ARGS as `mnistconv ARGS` would, running nothing: an unknown command or
    option, a value outside an option's choices or range, or a missing argument raises
    click.UsageError."""
    command, name, rest = cli, "mnistconv", list(args)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        sub = command.get_command(click.Context(command), rest[0])
        if sub is None:
            raise click.UsageError(f"no command {rest[0]!r}")
        command, name, rest = sub, rest[0], rest[1:]
    try:
        command.make_context(name, rest)
    except click.exceptions.Exit:  # --help, --version
        pass


SH_PAGES = [p for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
            if sh_commands(p)]


@pytest.mark.parametrize("page", SH_PAGES, ids=[str(p.relative_to(REPO)) for p in SH_PAGES])
def test_sh_examples_are_commands_the_cli_takes(page, monkeypatch):
    monkeypatch.chdir(REPO)  # a DIRECTORY that must exist (serve examples/browser) does
    for line, args in sh_commands(page):
        try:
            parse_as_the_cli_does(args)
        except click.ClickException as e:
            pytest.fail(f"{page.relative_to(REPO)}:{line}: mnistconv {shlex.join(args)}: "
                        f"{e.format_message()}")


def test_the_sh_check_finds_the_commands_and_refuses_what_the_cli_refuses():
    readme = [args for _, args in sh_commands(REPO / "README.md")]
    assert ["download", "mnist", "data/mnist"] in readme
    assert ["idx-to-npz", "data/", "-"] in [args for _, args in
                                           sh_commands(REPO / "docs" / "pipelines.md")]
    for args in (["convert", "a", "b", "--to", "nope"], ["show", "x", "--indx", "0:5"],
                 ["pack", "brows", "a", "b"], ["info"], ["idx-to-nope", "a", "b"]):
        with pytest.raises(click.UsageError):
            parse_as_the_cli_does(args)


def test_the_readme_quick_start_writes_the_files_its_comment_names(tmp_path):
    """The quick start's `idx-to-tfrecord data/mnist out/` (a ```sh block, on the full
    MNIST) names what it writes in its comment: on the sample, the same names."""
    line = next(line for line in (REPO / "README.md").read_text(encoding="utf-8")
                .splitlines() if line.startswith("mnistconv idx-to-tfrecord data/mnist out/"))
    command, named = line.split("#", 1)
    shutil.copytree(SAMPLE, tmp_path / "data" / "mnist")
    r = run(*shlex.split(command)[1:], "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    written = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "out").rglob("*"))
    assert written == sorted(name.strip() for name in named.split(","))
