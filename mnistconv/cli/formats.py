"""formats: the formats mnistconv reads and writes, with their options, from the
formats' own declarations (their SPECs). The documentation site's formats overview is
this command's `--markdown` output (docs/hooks.py)."""

import click

from .. import registry
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


@click.command("formats")
@run_options("json")
@click.option("--markdown", is_flag=True, help="Print the formats as a Markdown table "
                                                "(the documentation site's overview).")
def formats_command(run, markdown):
    """List the formats mnistconv reads and writes, with their options.

    \b
    Examples:
      mnistconv formats
      mnistconv formats --json | jq '.[].name'
      mnistconv formats --markdown
    """
    rows = [{"name": f.name, "read": f.can_read, "write": f.can_write, "stdio": f.stdio,
             "description": f.description, "extensions": list(f.extensions),
             "read_options": [o.flag for o in f.read_options],
             "write_options": [o.flag for o in f.write_options]}
            for f in registry.FORMATS.values()]
    if run.as_json:
        emit_json(rows)
        return 0
    if markdown:
        click.echo(markdown_table())
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
    return 0
