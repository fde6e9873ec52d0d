"""The README's table of what each format holds is the one the formats declare (the
table `mnistconv formats --markdown` ends with), so it cannot drift from the code."""

from helpers import REPO
from mnistconv.cli.formats import capability_table


def test_readme_shows_the_declared_capability_table():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert capability_table() in readme
