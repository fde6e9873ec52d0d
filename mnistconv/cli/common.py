"""What every command shares: options, progress on stderr, JSON on stdout, messages.

Only the CLI prints. Data and --json summaries go to stdout; progress, notes and errors
go to stderr, so `mnistconv ... --json | jq` and `mnistconv ... - | other` stay clean.
"""

import functools
import json
import sys
import time
from dataclasses import dataclass

import click

from ..errors import redact
from ..model.records import Progress


@dataclass(frozen=True)
class Run:
    """How a command replaces outputs and reports: --force, -q/--quiet, --json."""

    force: bool = False
    quiet: bool = False
    as_json: bool = False


_RUN_FLAGS = {
    "force": click.option("--force", is_flag=True,
                          help="Overwrite outputs that already exist."),
    "quiet": click.option("-q", "--quiet", is_flag=True,
                          help="No progress bars or notes; errors only."),
    "json": click.option("--json", "as_json", is_flag=True,
                         help="Print a machine-readable summary on stdout."),
}


def stacked(*decorators):
    """One decorator for several, applied as if written one above the other."""
    def decorate(f):
        for decorator in reversed(decorators):
            f = decorator(f)
        return f
    return decorate


def bundle(name, make, *decorators):
    """stacked(*decorators), but the command gets their values as one parameter `name`:
    make(**values)."""
    options = stacked(*decorators)
    names = [p.name for p in options(lambda: None).__click_params__ if p.expose_value]

    def decorate(f):
        @functools.wraps(f)
        def command(*args, **values):
            mine = {n: values.pop(n) for n in names if n in values}
            return f(*args, **values, **{name: make(**mine)})
        return options(command)
    return decorate


def run_options(*flags):
    """The shared flags named ("force", "quiet", "json"), given to the command as one
    Run in its parameter `run`."""
    return bundle("run", Run, *(_RUN_FLAGS[flag] for flag in flags))


def _timeout(ctx, param, value):
    if value is not None:
        from ..io import remote
        ctx.with_resource(remote.timeout(value))  # for the rest of the command


timeout_option = click.option(
    "--timeout", type=click.FloatRange(min=0, min_open=True), metavar="S",
    callback=_timeout, expose_value=False,
    help="Give up on a remote input or output (https://, s3://, ...) after S seconds "
         "without progress (a listing not answered, a file arriving at less than "
         "1 KB/s over S seconds).  [default: 60]")


def _follow_links(ctx, param, value):
    if value:
        from ..io.fileio import following_links
        ctx.with_resource(following_links())  # for the rest of the command


follow_links_option = click.option(
    "--follow-links", is_flag=True, callback=_follow_links, expose_value=False,
    help="Read through symlinks that lead outside the input's tree (you trust its "
         "links: a DVC or git-annex cache); FIFOs, devices and sockets are still "
         "refused. A Hugging Face cache snapshot is read without it.")


def say(message, err=False):
    """One line of output, any password in a URL shown as *** (errors.redact)."""
    click.echo(redact(message), err=err)


def _max_image_size(ctx, param, value):
    if value is None:
        return None
    import re
    from .. import limits
    from ..errors import UsageError
    m = re.fullmatch(r"\s*(\d{1,9})\s*[xX]\s*(\d{1,9})\s*", value)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise UsageError(None, f"--max-image-size {value!r} is not WxH",
                         "write e.g. 8192x8192")
    before = limits.set_max_image_pixels(int(m.group(1)) * int(m.group(2)))
    # For this command only: a caller running several in one process gets it back.
    ctx.call_on_close(lambda: limits.set_max_image_pixels(before))
    return None


max_image_size_option = click.option(
    "--max-image-size", metavar="WxH", expose_value=False, callback=_max_image_size,
    help="Largest image to read, in pixels (default 4096x4096, at most 16384x16384). "
         "Memory grows with it: each image held costs W*H bytes per channel "
         "(16 MiB at the default, 64 MiB at 8192x8192, 256 MiB at 16384x16384), and "
         "a run holds a few at once.")


def note(message, quiet=False):
    """A line on stderr (stdout may carry data or JSON), below any progress bars."""
    if not quiet:
        close_progress()
        say(message, err=True)


def emit_json(obj):
    """`obj` as JSON on stdout, below any progress display, NaN and infinities as null."""
    close_progress()
    say(json.dumps(_finite(obj), indent=2, sort_keys=False, allow_nan=False))


def _finite(obj):
    """NaN and infinities as null: json.dumps's NaN/Infinity is not JSON (jq refuses it)."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def stderr_is_terminal():
    """Whether a person may be watching stderr (the tests replace this)."""
    return sys.stderr.isatty()


class RichProgress(Progress):
    """rich progress bars on stderr: one live display for the whole command (restarting
    it per split made rich print every earlier line again), one line per split with its
    count, rate and time left. close(), the end of the command or the next note() stops
    it. `step` asks for pieces of PIECE_SECONDS of work, so a count moves even while a
    writer takes seconds over one reader batch."""

    REFRESH_HZ = 10
    PIECE_SECONDS = 0.05
    MIN_STEP, FIRST_STEP = 64, 512
    batch = 2048  # reader batches: a fraction of a second of TFRecord JPEG decoding

    def __init__(self):
        from rich.console import Console  # here: commands that draw nothing skip rich
        self.bars = _fitted_bars(Console(stderr=True), self.REFRESH_HZ)
        self.task = None
        self.started = self.closed = False
        self._began, self._done = None, 0

    @property
    def step(self):
        """About PIECE_SECONDS of work at the rate seen so far in this task."""
        elapsed = time.monotonic() - self._began if self._began else 0
        if self.task is None or self._done <= 0 or elapsed <= 0:
            return self.FIRST_STEP
        return max(self.MIN_STEP, int(self._done / elapsed * self.PIECE_SECONDS))

    def start(self, description, total):
        if self.closed:  # a note came between two tasks: a new display below it
            self.closed = self.started = False
        if not self.started:
            self.bars.start()
            self.started = True
            _open.append(self)
        self.task = self.bars.add_task(redact(description), total=total)
        self._began, self._done = time.monotonic(), 0

    def advance(self, n):
        if self.task is not None:
            self._done += n
            self.bars.advance(self.task, n)

    def finish(self):
        if self.task is not None:  # shown as done: its elapsed time, not time left
            self.bars.update(self.task, completed=self._done)
        self.task = None

    def close(self):
        if self.started and not self.closed:
            self.closed = True
            self.bars.stop()  # its final lines stay on the terminal
        if self in _open:
            _open.remove(self)

    def __del__(self):
        # A forgotten display must not keep drawing from its thread.
        try:
            self.close()
        except Exception:
            pass


_open = []  # RichProgress displays drawing now


def close_progress():
    """Stop every progress display still drawing (before printing below it)."""
    for progress in list(_open):
        progress.close()


def _fitted_bars(console, refresh_hz):
    """rich Progress fitting the terminal: drops the bar, then time left, then the rate."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress as Bars,
                               ProgressColumn, TimeRemainingColumn)
    from rich.table import Column
    from rich.text import Text

    class RateColumn(ProgressColumn):
        """Examples per second (rich's own speed column counts bytes)."""

        def render(self, task):
            # A finished task: its overall rate (rich's needs two samples).
            speed = task.completed / task.finished_time if task.finished_time else task.speed
            return Text(f"{speed:,.0f}/s" if speed else "", style="progress.data.speed")

    class Description(ProgressColumn):
        max_refresh = None

        def render(self, task):
            return Text(task.description, no_wrap=True, overflow="ellipsis")

    class Fitted(Bars):
        description = Description(table_column=Column(no_wrap=True, overflow="ellipsis"))
        bar = BarColumn()
        count = MofNCompleteColumn(table_column=Column(no_wrap=True))
        rate = RateColumn(table_column=Column(no_wrap=True))
        left = TimeRemainingColumn(elapsed_when_finished=True,
                                   table_column=Column(no_wrap=True))

        def make_tasks_table(self, tasks):
            tasks = [t for t in tasks if t.visible]
            width = console.width
            longest = max((len(t.description) for t in tasks), default=0)
            count = max((2 * len(str(int(t.total or 0))) + 1 for t in tasks), default=3)
            kept = [(self.rate, 11), (self.left, 7)]  # "1,234,567/s", "0:00:00"

            def used():
                return longest + 1 + count + sum(w + 1 for _, w in kept)

            room = width - used() - 1
            bar = (self.bar,) if room >= 10 else ()
            if bar:
                self.bar.bar_width = min(40, room)
            while not bar and kept and used() > width:
                kept.pop()
            self.description.get_table_column().max_width = max(1, width - used() + longest)
            self.columns = (self.description, *bar, self.count) + tuple(c for c, _ in kept)
            return super().make_tasks_table(tasks)

    return Fitted(console=console, refresh_per_second=refresh_hz,
                  redirect_stdout=False, redirect_stderr=False)


def make_progress(quiet: bool) -> Progress:
    """Bars only for a person watching: not under --quiet, not when stderr is a log;
    closed when the click command ends, however it ends."""
    if quiet or not stderr_is_terminal():
        return Progress()
    progress = RichProgress()
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.call_on_close(progress.close)
    return progress


def files_json(files):
    """Written files (OutputFile) as --json lists them: path, bytes, sha256."""
    return [{"path": f.path, "bytes": f.bytes, "sha256": f.sha256} for f in files]
