"""Comments and docstrings in mnistconv/ say why, not how fast: no timings, speed-ups,
percentages, rates or measured memory (house rule 13; the figures live in
benchmarks/README.md)."""

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mnistconv"

FIGURE = re.compile(r"""
    \b\d+(?:[.,]\d+)*(?:-\d+(?:\.\d+)?)?\s?(?:ms|us|µs|ns|s|secs?|seconds?)\b
  | \b\d+(?:\.\d+)?\s?x\s(?:faster|slower)\b | \btimes\s(?:faster|slower)\b | \bspeed-?ups?\b
  | \d\s?%
  | \d[\d,.]*k?\s?(?:[a-z]+)?/s\b
  | (?:\bpeak(?:ed|s)?|\btook|\bof\smemory)\W+(?:[\w']+\W+){0,3}?\d[\d.,]*\s?[KMGT]i?B\b
  | \b\d[\d.,]*\s?[KMGT]i?B\s(?:of\smemory|peak|more)\b
""", re.X)

# Figures that are settings or examples of a format, not measurements: (file, text).
ALLOWED = {
    ("cli/common.py", '"1,234,567/s"'),  # the progress display's rate format
    ("cli/pack.py", "30 s of silence"),  # the server's idle timeout, a setting
    ("remote.py", "`--timeout`: 60 s"),  # the option's default
    ("formats/tfds/format.py", "count 1024s"),  # powers of 1024, not seconds
}


def texts(path):
    """(line, text) of every comment and docstring line of a module."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)) and ast.get_docstring(node):
            first = node.body[0].lineno
            for i, line in enumerate(ast.get_docstring(node, clean=False).splitlines()):
                yield first + i, line


def figures(path):
    name = path.relative_to(PACKAGE).as_posix()
    found = []
    for line, text in texts(path):
        if any(name == f and allowed in text for f, allowed in ALLOWED):
            continue
        found += [f"{name}:{line}: {m.group(0)!r}" for m in FIGURE.finditer(text)]
    return found


def test_no_timings_or_memory_figures_in_comments_or_docstrings():
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in figures(path)]
    assert found == []


@pytest.mark.parametrize("text", [
    "# took 0.19 s of CPU", "# 45 ms of a 70 ms run", "# 14 us an image",
    "# 2.8x faster", "# 2-3 times faster", "# ~15% of the write", "# ~20k images/s",
    "# peaked at 330-510 MB", "# ~55 MB of memory for nothing", "# a speed-up",
])
def test_the_pattern_finds_figures(text):
    assert FIGURE.search(text)


@pytest.mark.parametrize("text", [
    "# 64 KiB blocks", "# a 1 MiB block at a time", "# MD5s as published",
    "# 2**31 - 1", "# 28 x 28 pixels", "# shard_size='100MB'", "# 16 MiB a channel",
])
def test_the_pattern_leaves_sizes_and_constants(text):
    assert not FIGURE.search(text)
