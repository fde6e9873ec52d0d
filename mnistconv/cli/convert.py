"""convert, the <reader>-to-<writer> commands, info and formats.

The format options and the a-to-b commands come from the registry, so a new format
appears here by registering it.
"""

import inspect
import os
import tempfile
import time

import click

from .. import registry
from ..errors import UsageError
from .common import (emit_json, files_json, force_option, json_option, make_progress, note,
                     quiet_option)


def selection_options(f):
    for decorator in reversed([
        click.option("--split", "splits", multiple=True, metavar="NAME",
                     help="Only this split (repeatable): train, test, validation, ..."),
        click.option("--limit", type=click.IntRange(min=0), metavar="N",
                     help="At most N examples per split (after shuffling/balancing)."),
        click.option("--per-class", type=click.IntRange(min=1), metavar="N",
                     help="N examples of each class, interleaved 0,1,2,...,0,1,2,..."),
        click.option("--shuffle", is_flag=True, help="Shuffle each split (see --seed)."),
        click.option("--seed", type=click.IntRange(min=0), default=None,
                     help="Seed for --shuffle (default 0); same seed, same order."),
        click.option("--transpose", is_flag=True,
                     help="Swap image rows and columns (EMNIST is stored transposed)."),
    ]):
        f = decorator(f)
    return f


def _click_option(opt: registry.Option):
    kinds = {"int": int, "float": float, "str": str, "path": click.Path(),
             "choice": click.Choice(opt.choices)}
    if opt.type == "flag":
        return click.option(opt.flag, opt.name, is_flag=True, default=False, help=opt.help)
    return click.option(opt.flag, opt.name, type=kinds[opt.type], default=opt.default,
                        show_default=opt.default is not None, help=opt.help)


def format_options(options):
    """Decorator adding each registry option once (formats may share a flag)."""
    unique = {}
    for opt in options:
        unique.setdefault(opt.flag, opt)

    def decorate(f):
        for opt in reversed(list(unique.values())):
            f = _click_option(opt)(f)
        return f
    return decorate


def _options_for(declared, values):
    return {o.name: values[o.name] for o in declared
            if o.name in values and values[o.name] is not None}


def _refuse_foreign(values, reader, writer):
    """An option set on the command line that neither chosen format takes is a mistake."""
    mine = {o.name for o in reader.read_options} | {o.name for o in writer.write_options}
    for fmt in registry.FORMATS.values():
        for o in fmt.read_options + fmt.write_options:
            if o.name not in mine and values.get(o.name) not in (None, False, o.default):
                raise UsageError(None, f"{o.flag} does not apply to reading {reader.name} "
                                       f"or writing {writer.name}")


class _Stdin:
    """'-' as the source: stdin spooled to a temporary file, detected by content."""

    def __init__(self, src):
        self.src, self.path = src, src

    def __enter__(self):
        if self.src == "-":
            import shutil
            import sys
            from ..fileio import remove_dead_leftovers, signals_deferred, staging_prefix
            if sys.stdin is None or sys.stdin.isatty():
                raise UsageError("-", "stdin is a terminal, not a dataset",
                                 "pipe one in: cat mnist.npz | mnistconv convert - out/")
            remove_dead_leftovers(tempfile.gettempdir())
            with signals_deferred():  # no interrupt between creating and remembering it
                fd, self.path = tempfile.mkstemp(prefix=staging_prefix("stdin")[1:])
            try:
                with os.fdopen(fd, "wb") as f:
                    shutil.copyfileobj(sys.stdin.buffer, f, 1 << 20)
            except BaseException:  # __exit__ does not run when __enter__ fails
                os.unlink(self.path)
                raise
        return self.path

    def __exit__(self, exc_type, exc, tb):
        if self.path != self.src:
            os.unlink(self.path)
            # Errors name what the user gave, '-', not our spool file.
            from ..errors import MnistconvError
            if isinstance(exc, MnistconvError) and exc.path \
                    and exc.path.startswith(self.path):
                exc.path = "-" + exc.path[len(self.path):]
            elif isinstance(exc, OSError) and exc.filename == self.path:
                exc.filename = "-"
        return False


def sha256sums_option(f):
    return click.option("--sha256sums", is_flag=True,
                        help="Also write SHA256SUMS beside the output (checked with "
                             "`sha256sum -c SHA256SUMS` in its directory).")(f)


def _sums_line(digest, name):
    """One line as GNU sha256sum prints it: a name with a backslash or newline is
    escaped and the line marked with a leading backslash."""
    if "\\" in name or "\n" in name:
        return "\\" + digest + "  " + name.replace("\\", "\\\\").replace("\n", "\\n") + "\n"
    return f"{digest}  {name}\n"


def write_sha256sums(files):
    """SHA256SUMS in the directory holding all the written files, names relative to it.
    Entries of an existing SHA256SUMS for other files are kept, so several outputs in
    one directory share one file; ours replace their old lines. Staged and renamed like
    every output. Returns its path."""
    from ..fileio import StagedOutput
    paths = [os.path.abspath(f.path) for f in files]
    folder = os.path.commonpath([os.path.dirname(p) for p in paths])
    target = os.path.join(folder, "SHA256SUMS")
    ours = {os.path.relpath(p, folder): f.sha256 for p, f in zip(paths, files)}
    lines = []
    if os.path.isfile(target):
        with open(target, encoding="utf-8", errors="surrogateescape") as old:
            for line in old:
                name = line.rstrip("\n")[66:] if not line.startswith("\\") else None
                if name is None or name not in ours:
                    lines.append(line if line.endswith("\n") else line + "\n")
    lines += [_sums_line(digest, name) for name, digest in ours.items()]
    with StagedOutput(force=True) as out:
        with open(out.file(target), "w", encoding="utf-8",
                  errors="surrogateescape") as f:
            f.writelines(lines)
    return target


def _check_sums_target(dst, writer):
    """--sha256sums is written after the data is committed: what would make it fail
    there (SHA256SUMS a directory or a device) is refused before anything is written."""
    from ..fileio import refuse_replacing_special
    folder = dst if writer.output_is_directory or registry.names_a_directory(dst) \
        else os.path.dirname(os.path.abspath(dst))
    target = os.path.join(folder, "SHA256SUMS")
    if os.path.isdir(target):
        raise UsageError(target, "is a directory; --sha256sums writes a file there")
    refuse_replacing_special(target)


def run_conversion(src, dst, from_name, to_name, values, quiet, as_json, force):
    import mnistconv
    from .. import stream
    if dst == "-" and as_json:
        raise UsageError(None, "--json prints on stdout, which '-' uses for the data")
    sums = values.pop("sha256sums", False)
    if dst == "-" and sums:
        raise UsageError(None, "--sha256sums needs an output file, not stdout")
    started = time.perf_counter()
    with _Stdin(src) as src_path:
        reader = registry.get(from_name) if from_name else registry.detect_input(src_path)
        writer = registry.get(to_name) if to_name else registry.detect_output(dst)
        if src == "-" and not reader.stdio:
            raise UsageError("-", f"{reader.name} cannot be read from stdin")
        if dst == "-" and not writer.stdio:
            raise UsageError("-", f"{writer.name} cannot be written to stdout")
        _refuse_foreign(values, reader, writer)
        if sums:
            _check_sums_target(dst, writer)
        dataset = mnistconv.read(src_path, reader.name, **_options_for(reader.read_options,
                                                                        values))
        dataset = stream.select(dataset, list(values["splits"]), values["limit"],
                                values["per_class"], values["shuffle"], values["seed"],
                                values["transpose"])
        write_options = _options_for(writer.write_options, values)
        stats = {}
        if "stats" in inspect.signature(writer.load().write).parameters:
            write_options["stats"] = stats
        files = mnistconv.write(dataset, dst, writer.name, force=force,
                                progress=make_progress(quiet), **write_options)
        sums_path = write_sha256sums(files) if sums and files else None
    splits = {name: {"count": s.header.count, "shape": list(s.header.shape),
                     "dtype": s.header.dtype.name} for name, s in dataset.splits.items()}
    if as_json:
        emit_json({"input": {"path": src, "format": reader.name},
                   "output": {"path": dst, "format": writer.name},
                   "splits": splits, "files": files_json(files), "stats": stats,
                   "notes": dataset.notes,
                   **({"sha256sums": sums_path} if sums_path else {})})
        return 0
    counts = ", ".join(f"{n} {s['count']}" for n, s in splits.items())
    note(f"{reader.name} -> {writer.name}: {counts} in "
         f"{time.perf_counter() - started:.2f} s", quiet)
    for f in files:
        note(f"  {f.path}  {f.bytes:,} bytes  sha256 {f.sha256}", quiet)
    for key, value in stats.items():
        note(f"  {key}: {value}", quiet)
    for text in dataset.notes + _unrecorded_split_name(dataset, dst, writer):
        note(f"  note: {text}", quiet)
    if sums_path:
        note(f"  {sums_path}  (sha256sum -c)", quiet)
    return 0


def _unrecorded_split_name(dataset, dst, writer):
    """One split written to one file of a format that does not record split names:
    say how to get the name back."""
    if len(dataset.splits) != 1 or not writer.split_names_from_file_names \
            or writer.output_is_directory or registry.names_a_directory(dst):
        return []
    name = next(iter(dataset.splits))
    return [f"{dst} does not record the split name '{name}'; read it back with "
            f"--split-name {name}"] if name != "train" else []


def _all_options(role):
    return [o for f in registry.FORMATS.values()
            for o in (f.read_options if role == "read" else f.write_options)]


@click.command()
@click.argument("src")
@click.argument("dst")
@click.option("--from", "from_name", type=click.Choice(list(registry.FORMATS)),
              help="Input format (default: detected from content, then name).")
@click.option("--to", "to_name", type=click.Choice(list(registry.FORMATS)),
              help="Output format (default: from DST's name; a directory is IDX).")
@selection_options
@format_options(_all_options("read") + _all_options("write"))
@force_option
@sha256sums_option
@quiet_option
@json_option
def convert(src, dst, from_name, to_name, force, quiet, as_json, **values):
    """Convert SRC to DST, any format to any format. '-' is stdin or stdout for formats
    that are a single stream.

    \b
    Examples:
      mnistconv convert data/mnist mnist.npz
      mnistconv convert mnist.npz out/ --to idx --gzip
      mnistconv convert data/mnist subset.npz --per-class 100 --split train
      cat mnist.npz | mnistconv convert - out/ --to idx
    """
    return run_conversion(src, dst, from_name, to_name, values, quiet, as_json, force)


def pair_command(reader_name, writer_name):
    reader, writer = registry.get(reader_name), registry.get(writer_name)
    example_dst = "out/" if writer.output_is_directory else \
        f"out{writer.extensions[0] if writer.extensions else ''}"
    example_src = "data/mnist" if reader.name == "idx" else \
        f"data{reader.extensions[0] if reader.extensions else ''}"

    def command(src, dst, force, quiet, as_json, **values):
        return run_conversion(src, dst, reader_name, writer_name, values, quiet, as_json,
                              force)
    command.__doc__ = (f"Convert {reader.description} to {writer.description}.\n\n"
                       f"\b\nExample:\n  mnistconv {reader.name}-to-{writer.name} "
                       f"{example_src} {example_dst}")
    for decorator in reversed([
        click.command(f"{reader.name}-to-{writer.name}"),
        click.argument("src"), click.argument("dst"), selection_options,
        format_options(list(reader.read_options) + list(writer.write_options)),
        force_option, sha256sums_option, quiet_option, json_option,
    ]):
        command = decorator(command)
    return command


def describe(dataset, check=True):
    """The facts `info` shows, as plain data (also the --json output)."""
    import numpy as np
    from ..fileio import sha256_file
    splits = {}
    for name, split in dataset.splits.items():
        if check and hasattr(split, "check"):
            split.check()
        labels = split.labels()
        h = split.header
        classes = np.bincount(labels.astype(np.int64, copy=False)) if len(labels) and \
            labels.dtype.kind in "iu" and labels.min() >= 0 else np.zeros(0, np.int64)
        splits[name] = {
            "count": h.count, "shape": list(h.shape), "dtype": h.dtype.name,
            "label_dtype": labels.dtype.name,
            "label_range": [labels.min().item(), labels.max().item()] if len(labels) else None,
            "class_counts": {str(c): int(n) for c, n in enumerate(classes) if n},
            "source": h.source,
        }
    files = [{"path": p, "bytes": os.path.getsize(p), "sha256": sha256_file(p)}
             for p in dataset.paths if os.path.isfile(p)]
    return {"format": dataset.format, "splits": splits, "files": files,
            "notes": dataset.notes}


@click.command()
@click.argument("path")
@click.option("--from", "from_name", type=click.Choice(list(registry.FORMATS)),
              help="Input format (default: detected).")
@format_options(_all_options("read"))
@selection_options
@json_option
def info(path, from_name, as_json, **values):
    """Show a dataset's format, splits, counts, element type, shape, labels and
    per-class counts, and the SHA-256 of each file. Reads everything once, so a
    truncated or corrupt file is reported here.

    \b
    Examples:
      mnistconv info data/mnist
      mnistconv info mnist.npz --json
    """
    import mnistconv
    from .. import stream
    reader = registry.get(from_name) if from_name else registry.detect_input(path)
    dataset = mnistconv.read(path, reader.name, **_options_for(reader.read_options, values))
    dataset = stream.select(dataset, list(values["splits"]), values["limit"],
                            values["per_class"], values["shuffle"], values["seed"],
                            values["transpose"])
    facts = describe(dataset)
    facts = {"path": path, **facts}
    from .view import orientation_hint, print_histogram
    for name, split in dataset.splits.items():
        facts["splits"][name]["orientation"] = orientation_hint(split, values["transpose"])
    if as_json:
        emit_json(facts)
        return 0
    click.echo(f"{path}: {facts['format']}, {len(facts['splits'])} split(s)")
    for name, s in facts["splits"].items():
        shape = "x".join(map(str, s["shape"]))
        low, high = s["label_range"] or ("-", "-")
        click.echo(f"  {name}: {s['count']} images {shape} {s['dtype']}, labels "
                   f"{s['label_dtype']} {low}..{high}")
        click.echo("    per class:")
        print_histogram(s["class_counts"], "      ")
    for f in facts["files"]:
        click.echo(f"  {f['sha256']}  {f['bytes']:>10}  {f['path']}")
    for text in facts["notes"]:
        click.echo(f"  note: {text}")
    return 0


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
