"""What every command shares: options, progress on stderr, JSON on stdout, messages.

Only the CLI prints. Data and --json summaries go to stdout; progress, notes and errors
go to stderr, so `mnistconv ... --json | jq` and `mnistconv ... - | other` stay clean.
"""

import json
import sys

import click

from ..records import Progress


def quiet_option(f):
    return click.option("-q", "--quiet", is_flag=True,
                        help="No progress bars or notes; errors only.")(f)


def json_option(f):
    return click.option("--json", "as_json", is_flag=True,
                        help="Print a machine-readable summary on stdout.")(f)


def force_option(f):
    return click.option("--force", is_flag=True,
                        help="Overwrite outputs that already exist.")(f)


def note(message, quiet=False):
    """A human-readable line on stderr (never stdout, which may carry data or JSON)."""
    if not quiet:
        click.echo(message, err=True)


def emit_json(obj):
    click.echo(json.dumps(obj, indent=2, sort_keys=False))


def stderr_is_terminal():
    return sys.stderr.isatty()


class RichProgress(Progress):
    """rich progress bars on stderr: count, rate and time left. One bar per task."""

    def __init__(self):
        # rich is imported here, not at the top: commands that draw nothing skip it.
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress as Bars,
                                   ProgressColumn, TextColumn, TimeRemainingColumn)
        from rich.text import Text

        class RateColumn(ProgressColumn):
            """Examples per second (rich's own speed column counts bytes)."""

            def render(self, task):
                speed = task.finished_speed or task.speed
                return Text(f"{speed:,.0f}/s" if speed else "", style="progress.data.speed")

        self.bars = Bars(TextColumn("{task.description}"), BarColumn(),
                         MofNCompleteColumn(), RateColumn(), TimeRemainingColumn(),
                         console=Console(stderr=True))
        self.task = None

    def start(self, description, total):
        if self.task is None:
            self.bars.start()
        self.task = self.bars.add_task(description, total=total)

    def advance(self, n):
        if self.task is not None:
            self.bars.advance(self.task, n)

    def finish(self):
        self.bars.stop()
        self.task = None


def make_progress(quiet: bool) -> Progress:
    """Bars only for a person watching: not under --quiet, not when stderr is a log."""
    if quiet or not stderr_is_terminal():
        return Progress()
    return RichProgress()


def files_json(files):
    return [{"path": f.path, "bytes": f.bytes, "sha256": f.sha256} for f in files]
