"""docs/library.md can be followed as written: its ```python blocks run, in order, in one
namespace (the page reads like a notebook), from a directory laid out as the
repository's root is for the bundled sample (examples/data/mnist-sample), so the page's
relative paths work and its outputs (out/...) land in a temporary directory, never in
the checkout. And the page keeps up with the code: it names every format option and
every public name of the package."""

import contextlib
import io
import os
import re
import shutil

import mnistconv
from helpers import REPO, SAMPLE

PAGE = REPO / "docs" / "library.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def _blocks():
    """(line number, code) of each ```python block of the page."""
    text = PAGE.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in BLOCK.finditer(text)]


def test_every_python_block_of_the_page_runs(tmp_path, monkeypatch):
    blocks = _blocks()
    assert len(blocks) >= 10  # the extraction found the page's examples
    shutil.copytree(SAMPLE, tmp_path / "examples" / "data" / "mnist-sample")
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "library_md"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for line, code in blocks:
            # Named by its line: a failure's traceback points into the page.
            exec(compile(code, f"{PAGE}:{line}", "exec"), namespace)
    printed = out.getvalue()
    # A few of the page's claims, checked on what its examples printed.
    assert "idx ['train', 'test']" in printed
    assert "out/mnist.npz: already exists; pass force=True to replace it" in printed
    assert "1000/1000\n200/200\n" in printed
    assert printed.rstrip().endswith("True\n200")
    # Everything was written under the temporary directory, below out/.
    assert sorted(os.listdir(tmp_path)) == ["examples", "out"]
    assert sorted(os.listdir(tmp_path / "examples" / "data" / "mnist-sample")) == \
        sorted(os.listdir(SAMPLE))


def test_the_page_names_every_option_and_public_name():
    text = PAGE.read_text(encoding="utf-8")
    for fmt in mnistconv.formats().values():
        for option in fmt.read_options + fmt.write_options:
            assert f"`{option.name}`" in text, (fmt.name, option.name)
    for name in mnistconv.__all__:
        assert name in text, name
