"""A pickle reader that runs nothing: it interprets the opcodes CIFAR's python files use
(https://docs.python.org/3/library/pickle.html, pickletools' opcode table) and builds only
dicts, lists, tuples, numbers, strings and bytes. The numpy arrays in them are pickled as
calls (GLOBAL numpy.core.multiarray._reconstruct, REDUCE, BUILD with the raw bytes), which
are recognised as data and never called; Python 3's protocol 2 pickles bytes as a call
to _codecs.encode(text, 'latin1'), recognised the same way. Any other global or call is
refused in one line, before anything of it is run or imported.

A large string (the 30 MB of pixels of a batch) is not read: it is a Blob, its offset
and length in the file, checked against the file's real length; the reader takes the
pixels from there batch by batch.
"""

import struct
from dataclasses import dataclass
from typing import Any, Optional

from ...errors import CorruptData, FormatError, OverLimit, Truncated
from ...limits import printable

# Strings longer than this are left in the file (Blob), not read.
INLINE_BYTES = 1 << 20
# Everything read into memory together: names, labels, file names.
MAX_INLINE_TOTAL = 64 << 20
# Objects built (CIFAR-100's train: 150,000 labels and file names).
MAX_OBJECTS = 2_000_000
RECONSTRUCT = {("numpy.core.multiarray", "_reconstruct"),
               ("numpy._core.multiarray", "_reconstruct")}
ALLOWED = RECONSTRUCT | {("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}


@dataclass(frozen=True)
class Blob:
    """Bytes left in the file: `length` bytes at `offset`."""
    offset: int
    length: int


@dataclass
class Array:
    """A pickled numpy array: shape, dtype string ('u1'), C or Fortran order, and its
    bytes (in memory or a Blob). `pending` until its BUILD gives the state."""
    shape: tuple = ()
    dtype: str = ""
    fortran: bool = False
    data: Any = None
    pending: bool = True


@dataclass(frozen=True)
class _Global:
    module: str
    name: str


@dataclass
class _Dtype:
    name: str


class _Mark:
    pass


MARK = _Mark()


class _Reader:
    def __init__(self, f, path, size):
        self.f, self.path, self.size, self.pos = f, path, size, 0
        self.inline = 0

    def read(self, n):
        if n > self.size - self.pos:
            raise Truncated(self.path, f"the pickle is truncated at byte {self.pos:,} "
                                       f"({n:,} bytes wanted, {self.size - self.pos:,} "
                                       "left)", "download the file again")
        data = self.f.read(n)
        if len(data) != n:
            raise Truncated(self.path, f"the pickle is truncated at byte {self.pos:,}",
                            "download the file again")
        self.pos += n
        return data

    def string(self, n, text=False):
        """n bytes of string data: in memory, or a Blob when long."""
        if n > self.size - self.pos:
            raise Truncated(self.path, f"the pickle declares a string of {n:,} bytes at "
                                       f"byte {self.pos:,}, the file holds "
                                       f"{self.size - self.pos:,} more",
                            "the file is truncated or damaged: download it again")
        if n > INLINE_BYTES:
            if text:
                raise FormatError(self.path, f"the pickle holds a text string of {n:,} "
                                             "bytes", "CIFAR's files hold their pixels "
                                                      "as byte strings")
            blob = Blob(self.pos, n)
            self.f.seek(self.pos + n)
            self.pos += n
            return blob
        self.inline += n
        if self.inline > MAX_INLINE_TOTAL:
            raise OverLimit(self.path, f"the pickle holds more than {MAX_INLINE_TOTAL:,} "
                                       "bytes of small strings, more than CIFAR's files")
        data = self.read(n)
        if text:
            try:
                return data.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                raise CorruptData(self.path, f"the pickle's text at byte {self.pos - n:,}"
                                             " is not UTF-8") from None
        return data


def _u(fmt, data):
    return struct.unpack(fmt, data)[0]


def load(f, path, size):
    """The object a pickle file holds, built as data (see the module docstring); f is
    open at the pickle's start and `size` bytes long."""
    r = _Reader(f, path, size)
    stack: list = []
    marks: list = []
    memo: dict = {}
    objects = 0

    def pop_mark():
        if not marks:
            raise CorruptData(path, f"the pickle is damaged at byte {r.pos:,} (no MARK)")
        at = marks.pop()
        items = stack[at:]
        del stack[at:]
        return items

    def pop():
        if not stack or (marks and len(stack) <= marks[-1]):
            raise CorruptData(path, f"the pickle is damaged at byte {r.pos:,} (an empty "
                                    "stack)")
        return stack.pop()

    def top(kind):
        if not stack or not isinstance(stack[-1], kind):
            raise CorruptData(path, f"the pickle is damaged at byte {r.pos:,}")
        return stack[-1]

    def push(value):
        nonlocal objects
        objects += 1
        if objects > MAX_OBJECTS:
            raise OverLimit(path, f"the pickle builds more than {MAX_OBJECTS:,} objects, "
                                  "more than CIFAR's files")
        stack.append(value)

    while True:
        op = r.read(1)
        code = op[0]
        if op == b".":  # STOP
            if len(stack) != 1 or marks:
                raise CorruptData(path, "the pickle is damaged (its STOP leaves "
                                        f"{len(stack)} objects)")
            return stack[0]
        if code == 0x80:  # PROTO
            if r.read(1)[0] > 5:
                raise FormatError(path, "the pickle's protocol is newer than 5",
                                  "CIFAR's python version uses protocol 2: download it again")
        elif code == 0x95:  # FRAME: a length hint only
            r.read(8)
        elif op == b"(":
            marks.append(len(stack))
        elif op == b"}":
            push({})
        elif op == b"]":
            push([])
        elif op == b")":
            push(())
        elif op == b"d":
            items = pop_mark()
            push(dict(zip(items[::2], items[1::2])))
        elif op == b"l":
            push(pop_mark())
        elif op == b"t":
            push(tuple(pop_mark()))
        elif code in (0x85, 0x86, 0x87):  # TUPLE1..3
            n = code - 0x84
            if len(stack) < n:
                raise CorruptData(path, f"the pickle is damaged at byte {r.pos:,}")
            items = tuple(stack[-n:])
            del stack[-n:]
            push(items)
        elif op == b"s":
            value, key = pop(), pop()
            _setitem(top(dict), key, value, path)
        elif op == b"u":
            items = pop_mark()
            d = top(dict)
            for key, value in zip(items[::2], items[1::2]):
                _setitem(d, key, value, path)
        elif op == b"a":
            value = pop()
            top(list).append(value)
        elif op == b"e":
            items = pop_mark()
            top(list).extend(items)
        elif op == b"J":
            push(_u("<i", r.read(4)))
        elif op == b"K":
            push(r.read(1)[0])
        elif op == b"M":
            push(_u("<H", r.read(2)))
        elif code == 0x8a:  # LONG1
            n = r.read(1)[0]
            push(int.from_bytes(r.read(n), "little", signed=True))
        elif op == b"N":
            push(None)
        elif code in (0x88, 0x89):
            push(code == 0x88)
        elif op == b"G":
            push(_u(">d", r.read(8)))
        elif op in (b"T", b"B"):  # BINSTRING (Python 2's str), BINBYTES
            push(r.string(_u("<I", r.read(4))))
        elif op in (b"U", b"C"):  # SHORT_BINSTRING, SHORT_BINBYTES
            push(r.string(r.read(1)[0]))
        elif code == 0x8e:  # BINBYTES8
            push(r.string(_u("<Q", r.read(8))))
        elif op == b"X":
            push(r.string(_u("<I", r.read(4)), text=True))
        elif code == 0x8c:
            push(r.string(r.read(1)[0], text=True))
        elif code == 0x8d:
            push(r.string(_u("<Q", r.read(8)), text=True))
        elif op in (b"q", b"r") or code == 0x94:  # BINPUT, LONG_BINPUT, MEMOIZE
            key = len(memo) if code == 0x94 else \
                r.read(1)[0] if op == b"q" else _u("<I", r.read(4))
            if not stack:
                raise CorruptData(path, f"the pickle is damaged at byte {r.pos:,}")
            memo[key] = stack[-1]
        elif op in (b"h", b"j"):  # BINGET, LONG_BINGET
            key = r.read(1)[0] if op == b"h" else _u("<I", r.read(4))
            if key not in memo:
                raise CorruptData(path, f"the pickle is damaged at byte {r.pos:,} (memo "
                                        f"{key} was never stored)")
            push(memo[key])
        elif op == b"c":  # GLOBAL module\nname\n
            module, name = _line(r), _line(r)
            push(_global(module, name, path))
        elif code == 0x93:  # STACK_GLOBAL
            name, module = pop(), pop()
            if not isinstance(module, str) or not isinstance(name, str):
                raise CorruptData(path, f"the pickle is damaged at byte {r.pos:,}")
            push(_global(module, name, path))
        elif op == b"R":  # REDUCE: a call, recognised as data or refused
            args, func = pop(), pop()
            push(_reduce(func, args, path))
        elif op == b"b":  # BUILD
            state = pop()
            _build(top((Array, _Dtype)), state, path)
        else:
            raise FormatError(path, f"the pickle uses opcode {op!r} at byte {r.pos - 1:,}, "
                                    "which CIFAR's files do not",
                              "mnistconv reads only the dicts, lists, strings and arrays "
                              "CIFAR's python files hold")


def _line(r):
    out = bytearray()
    while len(out) < 256:
        c = r.read(1)
        if c == b"\n":
            return out.decode("ascii", "replace")
        out += c
    raise CorruptData(r.path, f"the pickle is damaged at byte {r.pos:,} (a global's name "
                              "runs past 256 bytes)")


def _refuse(what, path):
    return FormatError(path, f"the pickle calls {printable(what, 60)}, not only the "
                             "dicts, lists, strings and arrays CIFAR's files hold",
                       "nothing of it was run: read the publishers' files")


def _global(module, name, path):
    if (module, name) not in ALLOWED:
        raise _refuse(f"{module}.{name}", path)
    return _Global(module, name)


def _reduce(func, args, path):
    if not isinstance(func, _Global) or not isinstance(args, tuple):
        raise CorruptData(path, "the pickle is damaged (a call of something not a "
                                "function)")
    key = (func.module, func.name)
    if key in RECONSTRUCT and len(args) == 3 and args[0] == _Global("numpy", "ndarray"):
        return Array()
    if key == ("numpy", "dtype") and args and isinstance(args[0], (str, bytes)) and \
            len(args[0]) <= 8:
        name = args[0]  # Python 2's str is bytes here
        return _Dtype(name.decode("latin-1") if isinstance(name, bytes) else name)
    if key == ("_codecs", "encode") and len(args) == 2 and isinstance(args[0], str) \
            and args[1] in ("latin1", "latin-1"):
        try:
            return args[0].encode("latin-1")
        except UnicodeEncodeError:
            raise CorruptData(path, "the pickle's latin-1 bytes are not latin-1") from None
    raise _refuse(f"{func.module}.{func.name} with other arguments than numpy's", path)


def _build(obj, state, path):
    if isinstance(obj, _Dtype):
        return  # (3, '|', ...): the byte order of one-byte items changes nothing
    if not obj.pending or not isinstance(state, tuple) or len(state) != 5 or \
            not isinstance(state[1], tuple) or not isinstance(state[2], _Dtype) or \
            not all(type(d) is int and d >= 0 for d in state[1]):
        raise CorruptData(path, "the pickle's array is damaged (its state is not "
                                "(version, shape, dtype, order, bytes))")
    obj.shape, obj.dtype, obj.fortran, obj.data = state[1], state[2].name, \
        bool(state[3]), state[4]
    obj.pending = False


def _setitem(d, key, value, path):
    if not isinstance(key, (str, bytes, int)):
        raise CorruptData(path, "the pickle is damaged (a dict key that is not a "
                                "string)")
    d[key] = value


def text_key(d: dict, name: str) -> Optional[Any]:
    """d[name] whether the key was pickled as str (Python 3) or bytes (Python 2)."""
    if name in d:
        return d[name]
    return d.get(name.encode())
