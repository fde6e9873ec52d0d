"""The documentation site builds strictly and holds everything the code offers: every
command of `mnistconv --help` (walked through click's command tree) with every option,
and a page for every format of the registry with every option it declares, its
default and its range. And README.md stays a front door: at most 250 lines, the two
set-up commands on its first screen."""

import html
import importlib.util
import os
import re
import subprocess
import sys

import click
import pytest

from helpers import REPO, run
from mnistconv.formats import registry
from mnistconv.cli import COMMANDS, cli

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                                reason="needs the docs extra (make docs installs it)")


def _text(path):
    """A built page's text: tags removed, entities decoded."""
    raw = path.read_text(encoding="utf-8")
    return html.unescape(re.sub(r"<[^>]+>", "", raw))


def _rows(path):
    """A built page's table rows, each as its cells' text."""
    raw = path.read_text(encoding="utf-8")
    return [[html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
             for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", raw, re.S)]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "--site-dir", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    return out


def test_readme_is_a_front_door():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    first_screen = "\n".join(lines[:40])
    assert "make demo" in first_screen and "make test" in first_screen


def _commands(ctx, command, path):
    """(path, command) of a command and of every subcommand under it."""
    yield path, command
    if isinstance(command, click.Group):
        sub = click.Context(command, info_name=path[-1], parent=ctx)
        for name in command.list_commands(sub):
            yield from _commands(sub, command.get_command(sub, name), path + [name])


def test_every_command_and_option_is_in_the_cli_reference(site):
    page = _text(site / "cli.html")
    ctx = click.Context(cli, info_name="mnistconv")
    seen = 0
    for path, command in _commands(ctx, cli, ["mnistconv"]):
        assert " ".join(path[1:]) in page, path
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                for flag in param.opts + param.secondary_opts:
                    assert flag in page, (path, flag)
        seen += 1
    # The top-level commands, their subcommands (pack browser) and every pair.
    pairs = len(registry.readers()) * len(registry.writers()) - sum(
        1 for f in registry.FORMATS.values() if f.can_read and f.can_write)
    assert seen >= 1 + len(COMMANDS) + pairs
    for name in COMMANDS:
        # Its own section, with its usage line.
        assert f"mnistconv {name} [OPTIONS]" in page, name


def _takes(option):
    if option.type == "choice":
        return list(option.choices)
    if option.low is not None or option.high is not None:
        return [str(v) for v in (option.low, option.high) if v is not None]
    return []


def test_every_format_has_a_page_with_every_option(site):
    listed = run("formats", "--json")
    listed.check_returncode()
    import json
    names = [row["name"] for row in json.loads(listed.stdout)]
    assert names == list(registry.FORMATS)
    overview = _text(site / "formats" / "index.html")
    for name in names:
        fmt = registry.get(name)
        page = _text(site / "formats" / f"{name}.html")
        rows = _rows(site / "formats" / f"{name}.html")
        assert fmt.description in page, name
        assert f'href="{name}.html"' in (site / "formats" / "index.html").read_text()
        assert name in overview
        for ext in fmt.extensions:
            assert ext in page, (name, ext)
        for option in fmt.read_options + fmt.write_options:
            # An option both sides take (Parquet's --config) has a row in each table.
            row = next((r for r in rows if r[:1] == [option.flag]
                        and r[-1:] == [option.help]), None)
            assert row is not None, (name, option.flag)
            flag, keyword, takes, default, text = row
            assert (keyword, text) == (option.name, option.help), row
            assert default == ("" if option.default is None else str(option.default)), row
            for value in _takes(option):
                assert value in takes, (name, option.flag, value, row)
        # The layout from the format's own docstring.
        assert "Layout" in page


def test_the_performance_page_shows_the_results_file(site):
    import json
    results = json.loads((REPO / "benchmarks" / "results.json").read_text())
    page = _text(site / "performance.html")
    for key, bench in results["benches"].items():
        assert bench["date"] in page, key
        for table in bench.get("tables", ()):
            for row in table["rows"]:
                assert html.unescape(re.sub(r"[*`]", "", row[0])) in page, (key, row[0])


def test_the_api_reference_documents_every_public_name(site):
    import mnistconv
    raw = (site / "api.html").read_text(encoding="utf-8")
    for name in mnistconv.__all__:
        home = "mnistconv.model.records" if name in mnistconv._RECORD_TYPES else "mnistconv"
        assert f'id="{home}.{name}"' in raw, name
    for loader in ("tf.dataset", "torch.dataset", "grain.source"):
        assert f'id="mnistconv.loaders.{loader}"' in raw, loader


def test_readme_links_lead_to_files_that_exist():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 10
    for link in local:
        assert (REPO / link).exists(), link


def test_every_writer_has_a_page_showing_the_client_that_reads_it():
    """The generated part of a format's page comes from its SPEC; the client that reads
    what it writes is hand-written in docs/formats/<name>.md, with examples the tests
    run (tests/test_docs_examples.py)."""
    for fmt in registry.writers():
        page = REPO / "docs" / "formats" / f"{fmt.name}.md"
        assert page.exists(), f"docs/formats/{fmt.name}.md: how its output is read"
        text = page.read_text(encoding="utf-8")
        assert text.startswith(f"<!-- generated: format {fmt.name} -->\n"), fmt.name
        assert "```python" in text or "```console" in text, fmt.name


def test_getting_started_has_a_row_for_every_command():
    """The one-table overview of the commands names each one `mnistconv --help` lists
    (the CLI reference is generated; this table is written by hand)."""
    text = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
    for name in COMMANDS:
        assert re.search(rf"^\| `{name}[ `]", text, re.M), name


def test_the_docs_say_how_to_search_them():
    # Material's search needs http (a page opened from disk has none): the front door
    # and getting started say to serve the site.
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert "its search needs http, not a page opened from disk: `mnistconv serve site/`" \
        in readme
    start = " ".join((REPO / "docs" / "getting-started.md").read_text(
        encoding="utf-8").split())
    assert "`mnistconv serve site/` serves it on `http://127.0.0.1:PORT/`" in start


def test_tables_wrap_inside_the_page(site):
    # The formats table (long option lists) wider than the page: the site's stylesheet
    # makes tables take the page's width and their cells wrap.
    css = (site / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    assert "display: table;" in css and "overflow-wrap: anywhere;" in css
    page = (site / "formats" / "index.html").read_text(encoding="utf-8")
    assert 'href="../stylesheets/extra.css"' in page


def test_the_fuzz_counts_name_every_reader():
    # `make fuzz` gives hostile inputs to every reader in the registry (tests/fuzz:
    # HOSTILE_READERS); the pages once said 13 after four colour readers had joined.
    n = len(registry.readers())
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert f"10,000 hostile inputs for each of the {n} readers" in readme
    safety = " ".join((REPO / "docs" / "safety.md").read_text(encoding="utf-8").split())
    assert f"10,000 hostile inputs per reader, for all {n} readers" in safety
