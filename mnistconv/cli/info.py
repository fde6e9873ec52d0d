"""info: what a dataset holds, split by split, and the SHA-256 of each file."""

import os

import click

from .common import emit_json, note, run_options, say, follow_links_option, timeout_option
from .inputs import Input, all_options, format_options, from_option, selection, \
    selection_options


def hash_in_background(paths):
    """Start hashing the files on a thread and return a function that waits for
    [(path, bytes, SHA-256)] or raises what hashing raised. hashlib lets go of the GIL,
    so the digests overlap the label counts and the orientation check instead of
    following them (benchmarks/README.md)."""
    import threading
    from ..io.fileio import file_digest
    done: list = []

    def run():
        try:
            done.append([(p, *file_digest(p)) for p in paths])
        except BaseException as e:  # handed to the caller, raised there
            done.append(e)

    thread = threading.Thread(target=run, name="info-sha256", daemon=True)
    thread.start()

    def wait():
        thread.join()
        if isinstance(done[0], BaseException):
            raise done[0]
        return done[0]
    return wait


def describe(dataset, transposed):
    """The facts `info` shows, as plain data (also the --json output), each split's
    orientation (read with --transpose or not) checked while the files hash."""
    import numpy as np
    from ..errors import FormatError
    from ..model.stream import extra_fields
    digests = hash_in_background([p for p in dataset.paths if os.path.isfile(p)])
    splits = {}
    for name, split in dataset.splits.items():
        split.check()
        labels = split.labels()
        h = split.header
        # A multi-label target (N x k of 0/1) counts the images carrying each label.
        classes = labels.sum(axis=0, dtype=np.int64) if labels.ndim == 2 else \
            np.bincount(labels.astype(np.int64, copy=False)) if len(labels) and \
            labels.dtype.kind in "iu" and labels.min() >= 0 else np.zeros(0, np.int64)
        splits[name] = {
            "count": h.count, "shape": list(h.shape), "dtype": h.dtype.name,
            "label_dtype": labels.dtype.name,
            "label_range": [labels.min().item(), labels.max().item()] if len(labels) else None,
            "class_counts": {str(c): int(n) for c, n in enumerate(classes) if n},
            "source": h.source,
            "schema": h.schema.as_json(),
        }
        if h.class_names:  # only where known: other datasets' output stays as it was
            splits[name]["class_names"] = list(h.class_names)
        try:
            extra = extra_fields(split)
            if extra is not None:
                splits[name]["extra_fields"] = list(extra[0])
        except FormatError as e:  # fields another tool wrote unevenly: not extra fields
            dataset.notes.append(f"{name}: no extra fields carried ({e})")
    for name, split in dataset.splits.items():
        splits[name]["orientation"] = orientation_hint(split, transposed)
    # Size and hash from one descriptor through the guard (no stat, then a read of
    # whatever is there by then).
    files = [{"path": p, "bytes": size, "sha256": digest} for p, size, digest in digests()]
    return {"format": dataset.format, "splits": splits, "files": files,
            "notes": dataset.notes}


@click.command()
@click.argument("path")
@from_option()
@format_options(all_options("read"))
@selection_options
@timeout_option
@follow_links_option
@run_options("json")
def info(path, from_name, run, **values):
    """Show a dataset's format, splits, counts, element type, shape, labels and
    per-class counts, and the SHA-256 of each file. Reads everything once, so a
    truncated or corrupt file is reported here.

    \b
    Examples:
      mnistconv info data/mnist
      mnistconv info mnist.npz --json
    """
    dataset = Input(path, from_name).read(values, selection(values))
    facts = {"path": path, **describe(dataset, bool(values["transpose"]))}
    if run.as_json:
        emit_json(facts)
        return 0
    say(f"{path}: {facts['format']}, {len(facts['splits'])} split(s)")
    for name, s in facts["splits"].items():
        shape = "x".join(map(str, s["shape"]))
        low, high = s["label_range"] or ("-", "-")
        say(f"  {name}: {s['count']} images {shape} {s['dtype']}, labels "
                   f"{s['label_dtype']} {low}..{high}")
        say(f"    schema: {dataset.splits[name].header.schema}")
        names = s.get("class_names", ())
        if names:
            say(f"    class names: {_names_line(names)}")
        if s.get("extra_fields"):
            say(f"    extra fields: {', '.join(s['extra_fields'])}")
        say("    per class:")
        counts = {f"{c} {_short(names[int(c)])}" if int(c) < len(names) else c: n
                  for c, n in s["class_counts"].items()}
        print_histogram(counts, "      ")
    for f in facts["files"]:
        say(f"  {f['sha256']}  {f['bytes']:>10}  {f['path']}")
    for text in facts["notes"]:
        say(f"  note: {text}")
    return 0


def _names_line(names, limit=12):
    """The first names, quoted as a file's data is (a name may hold a line break)."""
    from ..limits import printable
    shown = ", ".join(printable(n, 40) for n in names[:limit])
    return shown + (f", ... ({len(names)} names)" if len(names) > limit else "")


def _short(name, limit=24):
    """A name as a histogram label: control characters as '?', at most `limit` long."""
    text = "".join(c if c.isprintable() else "?" for c in name)
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def print_histogram(class_counts, indent="    "):
    """Per-class bars on stdout: coloured unicode blocks on a terminal, else '#' bars."""
    from rich.console import Console
    from ..views import view
    console = Console(highlight=False, soft_wrap=False)
    terminal = console.is_terminal
    # Bars longer than ~60 columns read no better; keep them short on wide terminals.
    rows = view.histogram_rows(class_counts, min(console.width, 72) - len(indent) - 1,
                               ascii=not terminal)
    for label, bar, count in rows:
        if terminal:
            from rich.text import Text
            console.print(Text.assemble(indent, label, " ", (bar, "cyan"), " ", count))
        else:
            say(f"{indent}{label} {bar} {count}")


def orientation_hint(split, transposed=False):
    """{looks_transposed, taller_share} for --json, and a hint on stderr when the
    images look transposed (EMNIST), or upright but read with --transpose."""
    from ..views import view
    verdict, share = view.looks_transposed(split)
    if verdict:
        fix = ("they were read with --transpose: drop it" if transposed else
               "read with --transpose (show, convert, info, ...)")
        note(f"hint: {split.name}: images look transposed, as EMNIST's are (only "
             f"{100 * share:.0f}% of them are taller than wide, against about 90% for "
             f"upright handwriting); {fix}")
    return {"looks_transposed": verdict,
            "taller_share": None if share is None else round(share, 3)}
