"""MkDocs hooks: the pages that are generated from the code, so they cannot drift.

- formats/index.md and formats/<name>.md: one page per format in the registry. Its head
  (what it is, what it reads and writes, its names) comes from its SPEC where the
  page's `<!-- generated: format NAME -->` marker stands; a hand-written
  docs/formats/<name>.md follows it with the client that reads the format (examples
  the tests run); every option with its default and range, the commands that use the
  format and its docstrings (the byte layout) end the page. A format without a
  hand-written page gets the generated parts alone.
- cli.md: every command of `mnistconv --help` through mkdocs-click, and every
  READER-to-WRITER command.
- api.md: a mkdocstrings entry for every name of mnistconv.__all__.
- performance.md: the entries of benchmarks/results.json (`make bench` writes it).

Markers are HTML comments alone on a line, `<!-- generated: KIND [ARG] -->`, replaced
in on_page_markdown. The repository's root is put on sys.path, so the checkout's own
mnistconv is documented whatever is installed.
"""

import json
import os
import re
import sys

from mkdocs.structure.files import File

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

RESULTS = os.path.join(ROOT, "benchmarks", "results.json")
MARKER = re.compile(r"^<!-- generated: ([a-z-]+)(?: ([\w.-]+))? -->$", re.M)


def _formats():
    from mnistconv.formats import registry
    return list(registry.FORMATS.values())


def on_config(config):
    """The nav's Formats entry becomes the overview and one page per format."""
    nav = config["nav"]
    for i, entry in enumerate(nav):
        if isinstance(entry, dict) and entry.get("Formats") == "formats/index.md":
            nav[i] = {"Formats": [{"Overview": "formats/index.md"}] + [
                {f.name: f"formats/{f.name}.md"} for f in _formats()]}
    return config


def on_files(files, config):
    """A page for every format that has no hand-written one (the marker alone)."""
    for fmt in _formats():
        uri = f"formats/{fmt.name}.md"
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri,
                                        content=f"<!-- generated: format {fmt.name} -->\n"))
    return files


def on_page_markdown(markdown, page, config, files):
    """Each marker replaced by what it names."""
    def replace(match):
        kind, arg = match.groups()
        return GENERATORS[kind](arg)
    markdown = MARKER.sub(replace, markdown)
    name = page.file.src_uri
    if name.startswith("formats/") and name != "formats/index.md":
        fmt = name[len("formats/"):-len(".md")]
        markdown += "\n" + format_reference(fmt) + "\n" + format_layout(fmt)
    return markdown


# --- formats --------------------------------------------------------------------------

def _output_kind(f):
    from mnistconv.cli.formats import _output_kind
    return _output_kind(f)


def formats_table(_=None):
    """The overview: `mnistconv formats --markdown` with each name linked to its page."""
    from mnistconv.cli.formats import markdown_table
    table = _escape(markdown_table())
    for f in _formats():
        table = table.replace(f"| **{f.name}**:", f"| [**{f.name}**]({f.name}.md):", 1)
    return table


def _escape(text):
    """Text from the code shown as it is: `<split>` is not an HTML tag."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _value(value):
    return "" if value is None else f"`{value}`"


def _takes(o):
    if o.type == "flag":
        return "a flag"
    if o.type == "choice":
        return "one of " + ", ".join(f"`{c}`" for c in o.choices)
    if o.type in ("int", "float"):
        if o.low is not None and o.high is not None:
            return f"{o.type} from {o.low} to {o.high}"
        if o.low is not None:
            return f"{o.type}, at least {o.low}"
        if o.high is not None:
            return f"{o.type}, at most {o.high}"
        return o.type
    return o.type


def options_table(options):
    """Markdown rows: flag, keyword argument, what it takes, default, what it does."""
    rows = ["| option | library keyword | takes | default | what it does |",
            "|---|---|---|---|---|"]
    for o in options:
        text = _escape(o.help).replace("|", "\\|")
        rows.append(f"| `{o.flag}` | `{o.name}` | {_takes(o)} | {_value(o.default)} | "
                    f"{text} |")
    return "\n".join(rows)


def format_page(name):
    """The generated head of a format's page: what it is, what it reads and writes, the
    names it goes by (its options and commands end the page)."""
    from mnistconv.formats import registry
    f = registry.get(name)
    names = [f"`{e}`" for e in f.extensions] + [
        f"`{s}` (sets `{opt}` {val})" for s, (opt, val) in f.compression_suffixes]
    facts = [
        ("reads", "yes" if f.can_read else "no"),
        ("writes", "yes" if f.can_write else "no"),
        ("`-` for stdin/stdout", "yes (one split, unsharded)" if f.stdio else "no"),
        ("recognised by name", ", ".join(names) or "no extension: by content"),
        ("output", _output_kind(f) if f.can_write else "(read only)"),
        ("split name", "taken from the file name when the file does not record it"
         if f.split_names_from_file_names else "recorded in the input"),
    ]
    out = [f"# {f.name}", "", _escape(f.description) + ".", ""]
    out += [f"- **{k}**: {v}" for k, v in facts]
    out += ["", "## What it holds", "", holds_table(f)]
    return "\n".join(out) + "\n"


def holds_table(f):
    """The format's declaration (its SPEC's Holds), a row per option that changes it;
    a write of anything else is refused before any output exists."""
    rows = ["| | images | pixel types | targets | extras | image size |",
            "|---|---|---|---|---|---|"]
    for label, holds in [("default", f.holds)] + [
            (f"`{next((o.flag for o in f.write_options if o.name == n), n)}`"
             + ("" if v is True else f" `{v}`"), h) for n, v, h in f.holds_when]:
        t = holds.table()
        rows.append(f"| {label} | {t['images']} | {t['dtypes']} | {t['targets']} | "
                    f"{t['extras']} | {t['image size']} |")
    return "\n".join(rows)


def format_reference(name):
    """The generated end of a format's page: its options and the commands that use it."""
    from mnistconv.formats import registry
    f = registry.get(name)
    out = []
    if f.read_options:
        out += ["", "## Reading options", "", options_table(f.read_options)]
    if f.write_options:
        out += ["", "## Writing options", "", options_table(f.write_options)]
    writers = [w.name for w in registry.writers() if w.name != f.name]
    readers = [r.name for r in registry.readers() if r.name != f.name]
    out += ["", "## Commands", ""]
    if f.can_write:
        out.append(f"- To it: `mnistconv convert SRC DST --to {f.name}`, or " +
                   ", ".join(f"`{r}-to-{f.name}`" for r in readers) + ".")
    else:
        out.append("- Read only: mnistconv reads the files as their publishers ship them "
                   "([the MNIST family](../family.md)) and converts them to any format "
                   "it writes.")
    if f.can_read:
        out.append(f"- From it: `mnistconv convert SRC DST --from {f.name}`, or " +
                   ", ".join(f"`{f.name}-to-{w}`" for w in writers) + ".")
    out.append(f"- In Python: `mnistconv.read(path, format=\"{f.name}\", ...)`" +
               (f", `mnistconv.write(dataset, path, format=\"{f.name}\", ...)`"
                if f.can_write else "") + " with the library keywords above.")
    return "\n".join(out) + "\n"


def format_layout(name):
    """The format's docstrings (its package's, and its code module's when that is
    another): the byte layout it reads and writes."""
    import importlib
    from mnistconv.formats import registry
    f = registry.get(name)
    modules = [f.module]
    parent = f.module.rsplit(".", 1)[0]
    if parent in registry.FORMAT_PACKAGES:
        modules.insert(0, parent)
    docs = [(m, (importlib.import_module(m).__doc__ or "").strip()) for m in modules]
    out = ["## Layout", "", "The format's own description of what it reads and writes, "
           "from its code:", ""]
    for module, doc in docs:
        if doc:
            out += [f"`{module.replace('.', '/')}`:", "", "```text", doc, "```", ""]
    return "\n".join(out)


# --- the command line ---------------------------------------------------------------

def _description(ctx, remove_ascii_art=False):
    """A command's help as Markdown: each of click's `\\b` paragraphs (the examples)
    kept line for line in a code block, as `--help` shows it, under its heading line
    ("Examples:") when it has one."""
    import inspect
    import textwrap
    paragraphs = inspect.cleandoc(ctx.command.help or ctx.command.short_help or "")
    for paragraph in paragraphs.split("\n\n"):
        lines = paragraph.splitlines()
        if lines and lines[0].strip() == "\b":
            lines = lines[1:]
            if lines and lines[0].rstrip().endswith(":") and not lines[0].startswith(" "):
                yield from (lines.pop(0), "")
            yield from ["```text"] + textwrap.dedent("\n".join(lines)).splitlines() + ["```"]
        else:
            yield from lines
        yield ""


def _command_docs(name, command):
    """mkdocs-click's Markdown for one command and its subcommands, with the help's
    examples as code and an option's unset default shown as nothing."""
    from mkdocs_click import _docs
    _docs._make_description = _description
    lines = _docs.make_command_docs(f"mnistconv {name}", command, depth=1, style="table",
                                    list_subcommands=True)
    return [line.replace("`Sentinel.UNSET`", "").replace("| None |", "| |")
            for line in lines]


def cli_reference(_=None):
    """Every command of `mnistconv --help` through mkdocs-click, then the pairs."""
    import importlib
    from mnistconv.formats import registry
    from mnistconv.cli import COMMANDS
    out = []
    for name, (where, _text) in COMMANDS.items():
        module, attr = where.split(":")
        out += _command_docs(name, getattr(importlib.import_module(module), attr)) + [""]
    out += ["## READER-to-WRITER", "",
            "One command per reader and writer, `mnistconv READER-to-WRITER SRC DST`: "
            "`convert` with both formats named, taking the selection options, the "
            "reader's reading options and the writer's writing options (each format's "
            "page lists them).", "",
            "| reader | commands |", "|---|---|"]
    for r in registry.readers():
        cmds = ", ".join(f"`{r.name}-to-{w.name}`" for w in registry.writers()
                         if w.name != r.name)
        out.append(f"| [{r.name}](formats/{r.name}.md) | {cmds} |")
    return "\n".join(out) + "\n"


# --- the library ---------------------------------------------------------------------

def api_reference(_=None):
    """A mkdocstrings entry for every name of mnistconv.__all__, where it is defined (the
    record types load lazily, so their home is mnistconv.model.records)."""
    import mnistconv
    out = []
    for name in mnistconv.__all__:
        home = "mnistconv.model.records" if name in mnistconv._RECORD_TYPES else "mnistconv"
        out += [f"::: {home}.{name}", "    options:", "      heading_level: 2",
                "      filters: [\"!^_\"]", ""]
    return "\n".join(out)


# --- benchmark results --------------------------------------------------------------

def _cell(value):
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(table):
    rows = ["| " + " | ".join(map(_cell, table["columns"])) + " |",
            "|" + "---|" * len(table["columns"])]
    rows += ["| " + " | ".join(map(_cell, row)) + " |" for row in table["rows"]]
    return "\n".join(rows)


def _entry(key, bench, heading):
    out = [f"### {bench.get('title', key)}", ""] if heading else []
    out += [f"*{bench['date']}: {bench['source']}*", ""]
    for t in bench.get("tables", ()):
        if t.get("title"):
            out += [f"**{_cell(t['title'])}**", ""]
        out += [_table(t), ""]
    if bench.get("targets"):
        out += [f"- **{'met' if t['met'] else 'missed'}**: {t['description']}"
                for t in bench["targets"]] + [""]
    out += [n + "\n" for n in bench.get("notes", ())]
    if bench.get("output"):
        out += ['??? note "The bench\'s whole output"', "", "    ```text"] + [
            "    " + line for line in bench["output"].rstrip().splitlines()] + [
            "    ```", ""]
    return out


def results(key):
    """An entry of benchmarks/results.json (when, where and how it was measured, its
    tables, targets, notes and the bench's whole output), or with `measured` every
    bench entry the other markers do not show."""
    with open(RESULTS, encoding="utf-8") as f:
        benches = json.load(f)["benches"]
    if key != "measured":
        return "\n".join(_entry(key, benches[key], heading=False))
    keys = [k for k in sorted(benches) if k not in ("summary", "bench_scale")]
    if not keys:
        return "No `make bench` run has been recorded in benchmarks/results.json yet.\n"
    return "\n".join(line for k in keys for line in _entry(k, benches[k], heading=True))


GENERATORS = {"formats-table": formats_table, "format": format_page, "api": api_reference,
              "cli": cli_reference, "results": results}
