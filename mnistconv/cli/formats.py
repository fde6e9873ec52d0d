"""formats: the formats mnistconv reads and writes, with their options, from the
formats' own declarations (their SPECs). The documentation site's formats overview is
this command's `--markdown` output (docs/hooks.py)."""

import click

from ..formats import registry
from .common import emit_json, run_options


def _output_kind(f):
    if f.output_is_directory:
        return "a directory"
    if f.output_is_one_file:
        return "one file holding every split"
    return "a file per split (or a directory of them)"


def markdown_table():
    """The formats as the documentation site's overview shows them: one row per registered format."""
    rows = ["| format | read | write | `-` | names | output | options |",
            "|---|---|---|---|---|---|---|"]
    for f in registry.FORMATS.values():
        names = ", ".join(f"`{e}`" for e in f.extensions + tuple(
            s for s, _ in f.compression_suffixes)) or "(by content)"
        options = "; ".join(part for part in (
            "read: " + " ".join(f"`{o.flag}`" for o in f.read_options)
            if f.read_options else "",
            "write: " + " ".join(f"`{o.flag}`" for o in f.write_options)
            if f.write_options else "") if part)
        rows.append(f"| **{f.name}**: {f.description} | {'yes' if f.can_read else 'no'} | "
                    f"{'yes' if f.can_write else 'no'} | {'yes' if f.stdio else 'no'} | "
                    f"{names} | {_output_kind(f)} | {options} |")
    return "\n".join(rows)


def holds_line(f):
    """What the format holds, in one line (from its SPEC's Holds)."""
    t = f.holds.table()
    line = f"images {t['images']}; pixels {t['dtypes']}; targets {t['targets']}; " \
           f"extras {t['extras']}; image size {t['image size']}"
    for option, value, holds in f.holds_when:
        flag = next((o.flag for o in f.write_options if o.name == option), option)
        given = flag if value is True else f"{flag} {value}"
        w = holds.table()
        line += f" (with {given}: {w['images']}, {w['dtypes']})"
    return line


def capability_table():
    """What each format holds, from the declarations (spec.Holds): the table `mnistconv
    formats --markdown` ends with, and each format page shows its row of."""
    rows = ["| format | images | pixel types | targets | extras | image size |",
            "|---|---|---|---|---|---|"]
    for f in registry.FORMATS.values():
        t = f.holds.table()
        rows.append(f"| **{f.name}** | {t['images']} | {t['dtypes']} | {t['targets']} | "
                    f"{t['extras']} | {t['image size']} |")
    return "\n".join(rows)


@click.command("formats")
@run_options("json")
@click.option("--markdown", is_flag=True, help="Print the formats as a Markdown table "
                                                "(the documentation site's overview).")
def formats_command(run, markdown):
    """List the formats mnistconv reads and writes, with their options and what each
    holds (channels, pixel types, targets, extra columns, image size): a write of
    anything else is refused before any output exists.

    \b
    Examples:
      mnistconv formats
      mnistconv formats --json | jq '.[].name'
      mnistconv formats --markdown
    """
    rows = [{"name": f.name, "read": f.can_read, "write": f.can_write, "stdio": f.stdio,
             "description": f.description, "extensions": list(f.extensions),
             "read_options": [o.flag for o in f.read_options],
             "write_options": [o.flag for o in f.write_options],
             "holds": f.holds.table(),
             "holds_when": [{"option": o, "value": v, "holds": h.table()}
                            for o, v, h in f.holds_when]}
            for f in registry.FORMATS.values()]
    if run.as_json:
        emit_json(rows)
        return 0
    if markdown:
        click.echo(markdown_table())
        click.echo("")
        click.echo(capability_table())
        return 0
    # The name column is as wide as the longest name, so every description starts in
    # one column however long a format's name is.
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        modes = "".join(m for m, ok in (("r", r["read"]), ("w", r["write"])) if ok)
        click.echo(f"{r['name']:<{width}}  {modes:<2}  {r['description']}")
        # An option both sides take (Parquet's --config) is listed once.
        opts = list(dict.fromkeys(r["read_options"] + r["write_options"]))
        if opts:
            click.echo(f"{'':<{width + 6}}options: {' '.join(opts)}")
        click.echo(f"{'':<{width + 6}}holds: {holds_line(registry.get(r['name']))}")
    return 0
