"""formats: the formats mnistconv reads and writes, with their options, from the
registry."""

import click

from .. import registry
from .common import emit_json, json_option


@click.command("formats")
@json_option
def formats_command(as_json):
    """List the formats mnistconv reads and writes, with their options."""
    rows = []
    for f in registry.FORMATS.values():
        rows.append({"name": f.name, "read": f.can_read, "write": f.can_write,
                     "stdio": f.stdio, "description": f.description,
                     "extensions": list(f.extensions),
                     "read_options": [o.flag for o in f.read_options],
                     "write_options": [o.flag for o in f.write_options]})
    if as_json:
        emit_json(rows)
        return 0
    for r in rows:
        modes = "".join(m for m, ok in (("r", r["read"]), ("w", r["write"])) if ok)
        click.echo(f"{r['name']:<10} {modes:<3} {r['description']}")
        opts = r["read_options"] + r["write_options"]
        if opts:
            click.echo(f"{'':<14} options: {' '.join(opts)}")
    return 0
