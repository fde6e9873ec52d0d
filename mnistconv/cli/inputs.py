"""The input side of every command that reads a dataset: --from, the formats' read
options (from the registry's declarations, so a registered format's options appear on
every command), the selection, and `Input`, which detects a path's format once.
"""

import os
import tempfile
from dataclasses import dataclass
from typing import Optional

import click

from .. import detect
from ..formats import registry
from ..errors import UsageError
from .common import bundle, max_image_size_option, note, stacked, follow_links_option, timeout_option

def from_option(flag="--from", dest="from_name", help="Input format (default: detected)."):
    """--from FORMAT (or --from-a/--from-b): the input's format, not detected."""
    return click.option(flag, dest, type=click.Choice(list(registry.FORMATS)), help=help)


# None (the format's default orientation) unless given.
transpose_option = click.option(
    "--transpose/--no-transpose", default=None,
    help="Swap the stored image rows and columns, or not (default: EMNIST, stored "
         "transposed, is read upright; others as stored).")

# Which examples of the input, in which order, and made grey or not
# (mnistconv.model.stream.apply_selection).
selection_options = stacked(
    click.option("--split", "splits", multiple=True, metavar="NAME",
                 help="Only this split (repeatable): train, test, validation, ..."),
    click.option("--limit", type=click.IntRange(min=0), metavar="N",
                 help="At most N examples per split (after shuffling/balancing)."),
    click.option("--per-class", type=click.IntRange(min=1), metavar="N",
                 help="N examples of each class, interleaved 0,1,2,...,0,1,2,..."),
    click.option("--shuffle", is_flag=True, help="Shuffle each split (see --seed)."),
    click.option("--seed", type=click.IntRange(min=0), default=None,
                 help="Seed for --shuffle and --split-off (default 0); same seed, same "
                      "order."),
    click.option("--split-off", metavar="NAME=SIZE",
                 help="Carve a new split NAME out of train (or the only split): SIZE a "
                      "fraction in (0,1) or a count, chosen with --seed; each part keeps "
                      "the source's order."),
    click.option("--split-off-from", metavar="SPLIT",
                 help="The split --split-off carves from (default: train, or the only one)."),
    click.option("--stratify", is_flag=True,
                 help="--split-off carves each class in proportion to its share."),
    transpose_option,
    click.option("--grayscale", is_flag=True,
                 help="Make colour images grey (ITU-R 601-2 luma, as Pillow's "
                      "convert('L'); alpha dropped), and say so in the summary, --json's "
                      "notes and the card. Without it colour is kept as stored."),
    max_image_size_option,
)


def selection(values) -> dict:
    """What mnistconv.model.stream.apply_selection takes, from selection_options. values."""
    chosen = {name: values[name] for name in
              ("splits", "limit", "per_class", "shuffle", "seed", "transpose", "grayscale",
               "split_off", "split_off_from", "stratify")}
    chosen["splits"] = list(chosen["splits"])
    if chosen["split_off"] is not None:
        chosen["split_off"] = split_off_value(chosen["split_off"])
    return chosen


def split_off_value(text) -> dict:
    """--split-off NAME=SIZE as stream.split_off takes it: {NAME: a float fraction, or an
    int count}."""
    name, _, size = text.partition("=")
    try:
        number = int(size) if size.strip().isdigit() else float(size)
    except ValueError:
        raise UsageError(None, f"--split-off takes NAME=SIZE, not {text}",
                         "e.g. --split-off validation=0.1 (a fraction) or "
                         "validation=5000 (a count)") from None
    return {name: number}


def _click_option(opt: registry.Option):
    kinds = {"int": int, "float": float, "str": str, "path": click.Path(),
             "choice": click.Choice(opt.choices)}
    if opt.type == "flag":
        return click.option(opt.flag, opt.name, is_flag=True, default=False, help=opt.help)
    return click.option(opt.flag, opt.name, type=kinds[opt.type], default=opt.default,
                        show_default=opt.default is not None, help=opt.help)


def format_options(options):
    """Decorator adding each registry option as a click option, once (formats may
    share a flag): @format_options(all_options("read"))."""
    unique = {}
    for opt in options:
        first = unique.setdefault(opt.flag, opt)
        if first is not opt and first.type == opt.type == "choice":
            # One flag, several formats' choices (--layout: npz's nhwc, IDX's
            # torchvision): click takes them all, each format's write() checks its own;
            # no default unless they agree, so each format keeps its own.
            from dataclasses import replace
            unique[opt.flag] = replace(
                first, choices=tuple(dict.fromkeys(first.choices + opt.choices)),
                default=first.default if first.default == opt.default else None)
    return stacked(*map(_click_option, unique.values()))


def all_options(role):
    """Every format's "read" or "write" options, in registry order."""
    return [o for f in registry.FORMATS.values()
            for o in (f.read_options if role == "read" else f.write_options)]


def options_for(declared, values) -> dict:
    """The keyword arguments for one format: those of `declared` set in `values`."""
    return {o.name: values[o.name] for o in declared
            if o.name in values and values[o.name] is not None}


class Input:
    """A dataset named on the command line: its path and its format, named with --from
    or detected once, here: Input("data/mnist").read(values, selection(values))."""

    def __init__(self, path, from_name=None, from_flag="--from", shown_as=None):
        self.path = path
        self.shown_as = shown_as  # how messages name it ('-' for a stdin spool)
        self.format = registry.get(from_name) if from_name else \
            detect(path, from_flag)

    def read(self, values, select=None):
        """The dataset, read with the read options in `values` this format takes, then
        chosen and ordered by `select` (what mnistconv.model.stream.apply_selection takes)."""
        import mnistconv
        dataset = mnistconv.read(self.path, self.format.name,
                                 **options_for(self.format.read_options, values))
        if self.shown_as is not None:
            dataset.notes = [n.replace(str(self.path), self.shown_as)
                             for n in dataset.notes]
        if select is not None:
            from ..model import stream
            dataset = stream.apply_selection(dataset, select)
        return dataset


@dataclass(frozen=True)
class Source:
    """What show and preview draw from: PATH, --from, the read options given, --split
    and --transpose."""

    path: str
    from_name: Optional[str]
    split_name: Optional[str]
    transpose: Optional[bool]
    options: dict

    def split(self, quiet):
        """The split asked for, or the first one (saying which, when there are several)."""
        path, name = self.path, self.split_name
        dataset = Input(path, self.from_name).read(self.options, {"transpose": self.transpose})
        if name:
            if name not in dataset.splits:
                raise UsageError(path, f"no split named {name}",
                                 f"splits present: {', '.join(dataset.splits) or 'none'}")
            return dataset.splits[name]
        if not dataset.splits:
            raise UsageError(path, "holds no splits", "check that the path names a dataset")
        first, *others = dataset.splits
        if others:
            note(f"showing split {first}; also in {path}: {', '.join(others)} "
                 "(choose with --split)", quiet)
        return dataset.splits[first]


def _source(path, from_name, split_name, transpose, **options):
    return Source(path, from_name, split_name, transpose, options)


# PATH, --from, the read options, one --split, --transpose, --timeout: as one Source.
one_split_options = bundle(
    "source", _source,
    click.argument("path"),
    from_option(),
    format_options(all_options("read")),
    click.option("--split", "split_name", metavar="NAME",
                 help="The split to draw (default: the first, e.g. train)."),
    transpose_option,
    timeout_option,
    follow_links_option,
    max_image_size_option,
)


class StdinSpool:
    """'-' as the source: `with StdinSpool(src) as path` spools stdin to a temporary
    file (detected by content like any file), removed on leaving; errors name '-'."""

    def __init__(self, src):
        self.src, self.path = src, src

    def __enter__(self):
        if self.src == "-":
            import shutil
            import sys
            from ..io.fileio import create_staged, remove_dead_leftovers, remove_scratch, \
                signals_deferred, staging_prefix
            if sys.stdin is None or sys.stdin.isatty():
                raise UsageError("-", "stdin is a terminal, not a dataset",
                                 "pipe one in: cat mnist.npz | mnistconv convert - out/")
            remove_dead_leftovers(tempfile.gettempdir())
            # A file named `stdin` in a staging folder: readers that take a split name
            # from a file name then see no random letters (which could spell `test`).
            with signals_deferred():  # no interrupt between creating and remembering it
                self.folder = tempfile.mkdtemp(prefix=staging_prefix("stdin")[1:])
            self.path = os.path.join(self.folder, "stdin")
            try:
                with create_staged(self.path) as f:
                    shutil.copyfileobj(sys.stdin.buffer, f, 1 << 20)
            except BaseException:  # __exit__ does not run when __enter__ fails
                remove_scratch(self.folder)
                raise
        return self.path

    def __exit__(self, exc_type, exc, tb):
        if self.path != self.src:
            from ..io.fileio import remove_scratch
            remove_scratch(self.folder)
            # Errors name what the user gave, '-', not our spool file.
            from ..errors import MnistconvError
            if isinstance(exc, MnistconvError) and exc.path \
                    and exc.path.startswith(self.path):
                exc.path = "-" + exc.path[len(self.path):]
            elif isinstance(exc, OSError) and exc.filename == self.path:
                exc.filename = "-"
        return False
