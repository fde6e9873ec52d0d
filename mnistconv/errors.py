"""The errors the library raises. The CLI turns each into one line and an exit code.

The library never prints and never exits: every failure a user can cause is a
MnistconvError naming the file and what is wrong, optionally with what to do.
"""

import importlib
import re

# user:password@ in a URL (s3://key:secret@bucket, https://user:pw@host/...).
_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*):[^\s/]*@")


def redact(text) -> str:
    """text with the password of every URL in it replaced by ***, so that no message,
    note or summary shows one.

        redact("https://ann:s3cret@host/m.npz")  # 'https://ann:***@host/m.npz'
    """
    return _PASSWORD.sub(r"\1:***@", str(text))


class MnistconvError(Exception):
    """A failure a user can cause; exit code 1 (bad data or a failed write)."""

    exit_code = 1

    def __init__(self, path, message, hint=None, cli_hint=None):
        self.path = str(path) if path is not None else None
        self.message = message
        self.hint = hint
        # What to do, said the command line's way (`use --force`) where the library's
        # way differs (`pass force=True`): each caller is told what applies to it.
        self.cli_hint = cli_hint
        super().__init__(str(self))

    def _text(self, hint):
        text = f"{self.path}: {self.message}" if self.path else self.message
        return redact(f"{text}; {hint}" if hint else text)

    def __str__(self):
        return self._text(self.hint)

    def cli_message(self):
        """The message as the command line prints it."""
        return self._text(self.cli_hint or self.hint)

    def __reduce__(self):
        # Picklable, so that an error raised in a TFRecord worker process reaches the
        # parent as itself (the default would call __init__ with one argument).
        return _rebuild, (type(self), self.path, self.message, self.hint, self.cli_hint)


def _rebuild(cls, path, message, hint, cli_hint=None):
    error = cls.__new__(cls)
    MnistconvError.__init__(error, path, message, hint, cli_hint)
    return error


class FormatError(MnistconvError):
    """The input is not what its format says: bad magic, truncated, inconsistent."""


class UsageError(MnistconvError):
    """Bad options or arguments, an output that exists without --force; exit code 2."""

    exit_code = 2


class MissingDependency(UsageError):
    """An optional dependency is needed for this format or feature."""

    def __init__(self, module, extra, feature):
        super().__init__(
            None,
            f"{feature} needs the Python package '{module}'",
            f"install it with: pip install 'mnistconv[{extra}]'",
        )


def optional_import(name, extra, feature, package=None):
    """The module `name` (e.g. "h5py", "PIL.Image"), imported when a feature first
    needs it, or a MissingDependency saying that `feature` needs the pip `package`
    (default: the module's top-level name) and which mnistconv extra installs it.

        h5py = optional_import("h5py", "caffe", "Caffe's HDF5 format")
    """
    try:
        return importlib.import_module(name)
    except ImportError:
        raise MissingDependency(package or name.split(".")[0], extra, feature) from None
