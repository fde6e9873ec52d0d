"""The mnistconv command line. Commands live in modules imported only when run, so
`mnistconv --help` and light commands never pay for heavy ones; none imports this
package or another command module (inputs.py and common.py hold what they share).

Exit codes: 0 success; 1 bad input data or a failed write; 2 usage (bad options, an
output that exists without --force, a missing optional dependency); 130 interrupted
(SIGINT); 143 terminated (SIGTERM). Every error is one line on stderr, no traceback.
"""

import errno
import importlib
import os
import signal
import sys

import click

from .. import __version__
from ..errors import MnistconvError
from ..workers.process import end_at_start_up

# Each command: its name, the module:attribute that defines it, its one-line help (here,
# so that `mnistconv --help` imports no command).
_COMMAND_TABLE = """
convert   convert:convert          Convert SRC to DST, any format to any format.
info      info:info                Format, splits, counts, labels, per-class histogram, SHA-256 of each file.
formats   formats:formats_command  List the formats mnistconv reads and writes, with their options.
show      show:show                Draw images in the terminal with label and index.
preview   preview:preview          Write a PNG contact sheet, one row per class.
card      card:card                Write a dataset card: one self-contained HTML page.
compare   compare:compare          Compare two datasets split by split; exit 1 when they differ.
download  download:download        Download the MNIST family, CIFAR, SVHN or MedMNIST, checksums verified.
pack      pack:pack                Build asset packs (pack browser: GDMNIST1 + manifest).
verify    pack:verify              Check every file a pack manifest lists.
serve     pack:serve               Serve a directory on 127.0.0.1 (browser demo).
"""
# command name -> ("mnistconv.cli.<module>:<attribute>", one-line help)
COMMANDS = {name: ("mnistconv.cli." + where, text) for name, where, text in
            (line.split(None, 2) for line in _COMMAND_TABLE.strip().splitlines())}


def _pair_commands():
    from ..formats import registry
    return {f"{r.name}-to-{w.name}": (r.name, w.name)
            for r in registry.readers() for w in registry.writers() if r.name != w.name}


def _pair_command_formats(name):
    """(reader, writer) when name is one of _pair_commands(), else None: looked up by its
    parts, without making every pair's name."""
    from ..formats import registry
    at = name.find("-to-")
    while at > 0:
        reader = registry.FORMATS.get(name[:at])
        writer = registry.FORMATS.get(name[at + 4:])
        if reader is not None and writer is not None and reader.can_read and \
                writer.can_write and reader.name != writer.name:
            return reader.name, writer.name
        at = name.find("-to-", at + 1)
    return None


class StdoutGone(Exception):
    """The reader of stdout went away (`| head`): click would make BrokenPipeError exit 1."""


class Interrupted(BaseException):
    """Ctrl-C in place of KeyboardInterrupt, which click answers with an empty line; a
    BaseException, so no `except Exception` takes it for an error."""


class CliError(click.ClickException):
    """A failure a user can cause: `Error: <message>` on one line of stderr and its exit
    code (1 bad data or a failed write, 2 usage). The group raises it for every
    MnistconvError and OSError, so click's CliRunner shows exactly what a user sees."""

    def __init__(self, message, exit_code, path=None):
        super().__init__(one_line(message))
        self.exit_code = exit_code
        self.path = path  # the file the error is about, for --json's report

    @classmethod
    def of(cls, error):
        """The CliError for a MnistconvError or an OSError (a full disk: free space)."""
        if isinstance(error, MnistconvError):
            return cls(error.cli_message(), error.exit_code, error.path)
        name = error.filename or _written_to_stdout(error)
        where = f"{name}: " if name else ""
        hint = "; free some space and run again" if error.errno == errno.ENOSPC else ""
        return cls(f"{where}{error.strerror or error}{hint}", 1,
                   str(name) if name is not None else None)

    def show(self, file=None):
        """Print the one `Error:` line on stderr (click calls it as the command ends)."""
        click.echo(f"Error: {self.message}", file=file, err=True)


def _written_to_stdout(error):
    """'stdout' when an OSError without a file name came from click's echo (a full disk)."""
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "echo" and "click" in code.co_filename:
            return "stdout"
        tb = tb.tb_next
    return None


class LazyGroup(click.Group):
    """Commands imported when run (COMMANDS and every a-to-b pair), "did you mean" for a
    mistyped name, every error a user can cause raised as a CliError."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise StdoutGone() from None
        except (MnistconvError, OSError) as e:
            raise CliError.of(e) from e

    def resolve_command(self, ctx, args):
        """click's, with "did you mean" for a mistyped command. A command found is
        returned as click's would return it, built once: click's own lookup would build
        an a-to-b command and its options a second time."""
        name = args[0] if args else None
        if name and not name.startswith("-"):
            command = self.get_command(ctx, name)
            if command is not None:
                return name, command, args[1:]
            import difflib
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=3,
                                              cutoff=0.6)
            if close:
                ctx.fail(f"No such command '{name}'. Did you mean "
                         f"{' or '.join(repr(c) for c in close)}?")
        return super().resolve_command(ctx, args)

    def list_commands(self, ctx):
        return list(COMMANDS) + sorted(_pair_commands())

    def get_command(self, ctx, name):
        if name in COMMANDS:
            module, attr = COMMANDS[name][0].split(":")
            return getattr(importlib.import_module(module), attr)
        pair = _pair_command_formats(name)
        if pair is not None:
            from .convert import pair_command
            return pair_command(*pair)
        return None

    def format_commands(self, ctx, formatter):
        with formatter.section("Commands"):
            formatter.write_dl([(name, text) for name, (_, text) in COMMANDS.items()])
        by_reader = {}
        for reader, writer in sorted(_pair_commands().values()):
            by_reader.setdefault(f"{reader}-to-", []).append(writer)
        with formatter.section("Conversions (READER-to-WRITER SRC DST, options as convert)"):
            formatter.write_dl([(f"{r}WRITER", ", ".join(ws)) for r, ws in by_reader.items()])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
# The version given, not looked up: click's lookup scans the installed distributions
# (a test checks it equals the package's metadata).
@click.version_option(version=__version__, prog_name="mnistconv")
def cli():
    """Convert MNIST-like image datasets between the formats of TensorFlow, JAX,
    PyTorch, Hugging Face and Caffe (`mnistconv formats` lists them).

    \b
    Examples:
      mnistconv idx-to-npz data/mnist mnist.npz
      mnistconv convert data/mnist out.tfrecord --limit 1000
      mnistconv info data/mnist --json
    """


# The signal that ended the run, if one did: code can turn a handler's exception into
# another (a SIGTERM in protobuf's first import became a TypeError), so the signal, not
# the exception, says how the run exits.
_signalled = []


def _terminate(signum, frame):
    # Turn SIGTERM into an exception so staged outputs are cleaned up on the way out.
    _signalled.append(signum)
    raise SystemExit(128 + signum)


def _interrupt(signum, frame):
    _signalled.append(signum)
    raise Interrupted()


def _unraisable(hook_args):
    """A signal's exception dropped in a callback that cannot raise: deliver it again."""
    if _signalled and isinstance(hook_args.exc_value, (SystemExit, Interrupted)):
        # Not raise_signal(): its handler would run inside this hook, which cannot
        # raise either. A timer's handler runs once the callback has returned.
        signal.signal(signal.SIGALRM, _redeliver)
        signal.setitimer(signal.ITIMER_REAL, 0.001)
        return
    sys.__unraisablehook__(hook_args)


def _redeliver(signum, frame):
    if _signalled[-1] == signal.SIGINT:
        raise Interrupted()
    raise SystemExit(128 + _signalled[-1])


def one_line(text) -> str:
    """A message as one line, control characters (from a file name) escaped."""
    from ..errors import redact
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in redact(text))


def _guard_standard_streams():
    """A closed stdout or stderr (`>&-`): keep descriptors 1 and 2 taken (no file opened
    lands on them); writing to a closed stdout is a one-line error."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
            if name == "stdout":
                sys.stdout = _ClosedStdout()
            else:
                sys.stderr = os.fdopen(fd, "w", closefd=False)


class _ClosedStdout:
    """A stdout the caller closed: writing to it is an error naming it."""

    def write(self, data):
        raise MnistconvError("stdout", "standard output is closed",
                             "redirect it (> file) instead of closing it (>&-)")

    def flush(self):
        pass

    def isatty(self):
        return False

    @property
    def buffer(self):
        return self


def _die_of_sigpipe():
    """End as a Unix filter whose reader went away does: killed by SIGPIPE (status 141)."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    sys.exit(128 + signal.SIGPIPE)  # not reached where SIGPIPE kills


def main(argv=None):
    """Run the command line on `argv` (default: sys.argv[1:]) and exit with the codes of
    the module docstring: main(["info", "data/mnist"]) raises SystemExit(0)."""
    # Tests and embedding programs call main() more than once: each run starts with no
    # signal seen and leaves the handlers as it found them.
    del _signalled[:]
    previous = (sys.unraisablehook, signal.getsignal(signal.SIGTERM),
                signal.getsignal(signal.SIGINT))
    sys.unraisablehook = _unraisable
    signal.signal(signal.SIGTERM, _terminate)
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, end_at_start_up):
        signal.signal(signal.SIGINT, _interrupt)
    _guard_standard_streams()
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args[:args.index("--") if "--" in args else len(args)]
    try:
        # A command may return an int exit code (compare: 1 when the datasets differ).
        code = cli.main(args=args, prog_name="mnistconv", standalone_mode=False)
    except BaseException as e:
        if _signalled:
            _exit_by_signal(_signalled[0], as_json)
        _exit_for(e, as_json)
        raise
    finally:
        sys.unraisablehook = previous[0]
        signal.signal(signal.SIGTERM, previous[1])
        signal.signal(signal.SIGINT, previous[2])
        if "mnistconv.io.remote" in sys.modules:  # copies of remote inputs: the command
            sys.modules["mnistconv.io.remote"].remove_spools()  # is done with them
    sys.exit(code if isinstance(code, int) else 0)


def _exit_for(e, as_json=False):
    """One line and an exit code for what a user can cause (a bug keeps its traceback)."""
    if isinstance(e, (click.exceptions.Abort, KeyboardInterrupt, Interrupted)):
        _exit_by_signal(signal.SIGINT, as_json)
    if isinstance(e, (BrokenPipeError, StdoutGone)):
        _die_of_sigpipe()
    # Raised outside any command (`--help` to a closed stdout): not yet a CliError.
    if isinstance(e, (MnistconvError, OSError)):
        e = CliError.of(e)
    if isinstance(e, click.ClickException):
        e.show()
        _json_failure(as_json, one_line(e.format_message()), e.exit_code,
                      getattr(e, "path", None))
        sys.exit(e.exit_code)


def _exit_by_signal(signum, as_json):
    interrupted = signum == signal.SIGINT
    if interrupted:
        click.echo("Interrupted.", err=True)
    _json_failure(as_json, "interrupted" if interrupted else "terminated", 128 + signum)
    sys.exit(128 + signum)


def _json_failure(as_json, message, code, path=None):
    """A failed run given --json still prints one JSON object on stdout, for CI."""
    if not as_json:
        return
    report = {"error": message, "exit": code, **({"file": path} if path is not None else {})}
    try:
        from .common import emit_json
        emit_json(report)
    except (OSError, ValueError, MnistconvError):  # stdout closed or full: stderr said it
        pass


def console():
    """The `mnistconv` program: main(), flush, then os._exit, skipping the interpreter's
    teardown of every module (benchmarks/README.md); main() has already committed,
    reaped and cleaned everything."""
    from ..workers.process import tune_command_line
    tune_command_line()
    try:
        main()
        code = 0
    except SystemExit as e:
        code = 0 if e.code is None else e.code
    if not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # the reader went away after the last write
            if stream is sys.stdout:
                _die_of_sigpipe()
        except (OSError, ValueError):  # stream closed, or full (ENOSPC on stdout)
            code = code or 1
    os._exit(code)
