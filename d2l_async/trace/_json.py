"""Reading a Chrome-trace file into per-field columns: bounded, and lean on memory.

A profiler trace of a real training step is often 100–300 MB of JSON with a million events, most
of whose fields (input shapes, occupancy, ``External id`` ...) no figure uses.  Parsed into a
million Python dicts it costs ~1.2 KB per event: a 200 MB file peaked at 1.3 GiB.  And a file may
be hostile: 1 MiB of gzip that inflates to 1 GiB, ``/dev/zero`` behind a ``.json`` link, a FIFO
that never sends a byte.  So the reader

1. opens only a **regular file** (a FIFO, a device, a socket is refused before anything is read:
   it is opened without blocking, and its type checked on the open descriptor);
2. **checks sizes before it commits memory**: a plain file's size, and a gzip file's inflated size
   while it inflates it, a block at a time (the trailer's size is a first check, never trusted),
   against a limit: ``max_bytes``, by default a third of the memory this process can still get
   (:func:`d2l_async._machine.mem_available`: the container's limit less its use, never more
   than the host's ``MemAvailable``; and never more than the address space ``ulimit -v``
   (``RLIMIT_AS``) leaves it, :func:`address_space_left`), since reading takes up to
   :data:`PEAK_FACTOR` times the JSON's size.  Past the limit: a
   :class:`~d2l_async.trace.TraceError` naming the file, its size and the limit, never a bare
   ``MemoryError`` or a killed kernel; and should memory still run out (another process took it,
   or ``max_bytes`` was set above what there is), the reader's ``MemoryError`` becomes a
   ``TraceError`` that names the file, the limits in force and the fix;
3. with `msgspec <https://jcristharriff.com/msgspec/>`_ (a dependency; the standard library is the
   fallback) checks the whole document's syntax in C without building it, then cuts the
   ``traceEvents`` array into slices of about :data:`CHUNK_BYTES` at event boundaries (a ``},{``
   between two events: a cut that falls inside an event is told by its slice failing to decode,
   and a longer slice is taken) and decodes each slice into small typed records holding only the
   fields the reader needs (the C decoder skips the others without building them);
4. turns each slice's records into compact columns before decoding the next: strings and ids as
   ``int32`` codes into a table of their distinct values (a million events carry a few thousand
   names), numbers into numpy columns, a field no event has as one shared value, the rare
   ``args`` entries as a sparse ``{event: value}`` map.

Measured with ``benchmarks/bench_trace.py`` (``tiny``: 10^6 ``cpu_op`` events of 71 bytes each,
the smallest events a profiler writes, so the most per byte): the whole read peaks at
:data:`PEAK_FACTOR` times the JSON or less.  The decoders compared on the 109k-event A100 trace
(26 MB of JSON, alone in a process): stdlib ``json`` 0.59 s and +87 MB, ``msgspec`` untyped 0.59 s
and +83 MB, ``msgspec`` typed 0.31 s and +36 MB: typed msgspec is both the fastest and the leanest.

Numbers are taken as each vendor spells them, one column at a time (``_convert.py``): ROCm's
``"stream": "0x0"``, a ``ts`` written as a string, an id as ``7.0`` stay on the fast path, and a
value that cannot be converted is a :class:`TraceError` naming the file, the event and the field.
Without msgspec the standard library's ``json`` parses the file and the same columns are built
from dicts: slower, about :data:`SLOW_PEAK_FACTOR` times the JSON at its peak (the default limit
says so), same result.

:class:`Fields` is what both paths produce: for each trace event its ``ph``, ``cat``, ``name``,
``pid``, ``tid`` (coded), ``ts``, ``dur`` and the few ``args`` entries used.
"""

from __future__ import annotations

import codecs
import json
import math
import os
import re
import stat
import zlib
from array import array
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np

from .._machine import format_bytes, mem_available
from ._columns import Coded
from ._convert import NUMERIC, NumberColumn
from ._model import TraceError

__all__ = ["Fields", "load_fields", "read_bytes", "default_max_bytes", "check_max_bytes", "address_space_left",
           "out_of_memory", "HAVE_MSGSPEC", "PEAK_FACTOR"]

try:  # optional: the fast, lean path
    import msgspec

    HAVE_MSGSPEC = True
except ImportError:  # pragma: no cover - exercised by forcing the fallback in tests
    msgspec = None
    HAVE_MSGSPEC = False

#: args entries the reader uses
ARGS = ("correlation", "stream", "device", "bytes", "name", "labels", "d2l")
#: the reader's peak memory per byte of JSON, at most (msgspec path; bench_trace.py's ``tiny`` case)
PEAK_FACTOR = 3
#: the same for the standard library's json (a dict per event)
SLOW_PEAK_FACTOR = 15
#: the default limit where the available memory cannot be read (not Linux)
FALLBACK_MAX_BYTES = 1 << 30
#: bytes read from the file, or inflated, at a time
READ_BLOCK = 1 << 24
#: bytes of events decoded into records at a time: the records of one slice are turned into compact
#: columns before the next slice is decoded, so they never all exist at once
CHUNK_BYTES = 4 << 20
#: ... but at least 1/32 of the events' bytes per slice, down to this (a small file's records then
#: stay small beside it)
MIN_CHUNK_BYTES = 64 << 10
_GZIP_MAGIC = b"\x1f\x8b"
_SEP = re.compile(rb"\}\s*,\s*\{")  # between two events of the array
_SPACE = b" \t\r\n"
_OBJECTS = ("name", "labels", "d2l")  # the args entries that are not numbers: sparse
_ARG_NUMBERS = tuple(k for k in NUMERIC if k not in ("ts", "dur"))
_KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket"}


class Strings(Coded):
    """A coded column of the file (``ph``, ``cat``, ``name``, ``pid``, ``tid``): ``codes`` into the
    distinct values; ``column[i]`` is event i's value."""

    __slots__ = ()

    def __getitem__(self, i: int) -> Any:
        return self.categories[self.codes[i]]

    def code_of(self, value: Any) -> int:
        """The code of ``value`` (-1 when no event has it)."""
        for k, v in enumerate(self.categories.tolist()):
            if type(v) is type(value) and v == value:
                return k
        return -1


@dataclass
class Fields:
    """Per-event fields in file order.  ``ph``, ``cat``, ``name``, ``pid``, ``tid`` are
    :class:`Strings`; ``ts``, ``dur`` and the numeric ``args`` entries (``correlation``, ``stream``,
    ``device``, ``bytes``) numpy columns with their absent value filled (``ts`` NaN, ids -1, bytes
    0; read-only, and one shared value when no event has the field); the other ``args`` entries
    (``name``, ``labels``, ``d2l``) ``{event index: value}`` for the events that have them.  ``bad``
    holds, per numeric field, the values that could not be converted, by event index
    (``_convert.py``)."""

    n: int
    ph: Strings
    cat: Strings
    name: Strings
    pid: Strings
    tid: Strings
    ts: np.ndarray
    dur: np.ndarray
    args: dict[str, Any]
    top: dict[str, Any]  # the file's top-level fields other than traceEvents
    bad: dict[str, dict[int, Any]] = field(default_factory=dict)


if HAVE_MSGSPEC:
    # numbers are decoded as whatever the file wrote (Any) and converted per column: a string id
    # or time never fails the typed decode
    class _Args(msgspec.Struct, gc=False):
        correlation: Any = -1  # absent: the column's default (an explicit null is None)
        stream: Any = -1
        device: Any = -1
        bytes: Any = 0
        name: Any = None
        labels: Any = None
        d2l: Any = None

    class _Ev(msgspec.Struct, gc=False):
        ph: Any = None
        cat: Any = None
        name: Any = ""
        pid: Any = 0
        tid: Any = 0
        ts: Any = math.nan
        dur: Any = 0.0
        args: _Args | None = None

    _DECODER = msgspec.json.Decoder(list[_Ev])
    _TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])


# -- the limit -----------------------------------------------------------------------------------
def check_max_bytes(max_bytes: Any) -> int | None:
    """``max_bytes`` as the readers take it (a positive int, or None for the default), or an error."""
    if max_bytes is None:
        return None
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, (int, np.integer)):
        raise TypeError(f"max_bytes={max_bytes!r}: pass a number of bytes (an int > 0), or None for the default "
                        "(a share of the memory available now)")
    if max_bytes <= 0:
        raise ValueError(f"max_bytes={max_bytes!r}: pass a number of bytes > 0, or None for the default")
    return int(max_bytes)


def address_space_left() -> tuple[int, int] | None:
    """``(bytes of address space this process may still map, its RLIMIT_AS)`` when ``ulimit -v``
    caps it (a cap a cgroup does not show: the kernel refuses the mapping and Python raises
    ``MemoryError``); None without a cap."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, AttributeError, OSError, ValueError):  # no RLIMIT_AS on this platform
        return None
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    mapped = 0
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    mapped = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    return max(soft - mapped, 0), soft


def default_max_bytes() -> tuple[int, str]:
    """The JSON bytes the reader accepts now, and why (for the refusal): the memory this process can
    still get (the host's, a container's limit, the address space ``ulimit -v`` leaves), divided by
    what reading costs per byte (:data:`PEAK_FACTOR`)."""
    factor = PEAK_FACTOR if HAVE_MSGSPEC else SLOW_PEAK_FACTOR
    available, limit = mem_available("/")
    space = address_space_left()
    if space is not None and (available <= 0 or space[0] < available):
        left, cap = space
        return left // factor, (f"1/{factor} of the {format_bytes(left)} of address space this process has left "
                                f"under its limit of {format_bytes(cap)} (ulimit -v, RLIMIT_AS): reading takes up "
                                f"to {factor}x the JSON's size")
    if available <= 0:
        return FALLBACK_MAX_BYTES, (f"the reader's default of {format_bytes(FALLBACK_MAX_BYTES)} (this machine's "
                                    "free memory cannot be read)")
    where = f", container limit {format_bytes(limit)}" if limit else ""
    return available // factor, (f"1/{factor} of the {format_bytes(available)} of memory available now{where}: "
                                 f"reading takes up to {factor}x the JSON's size")


def out_of_memory(path: Path, max_bytes: int | None) -> TraceError:
    """The reader's ``MemoryError`` as a :class:`TraceError`: the file, the limits in force, the fix."""
    limits = []
    space = address_space_left()
    if space is not None:
        limits.append(f"an address-space limit (ulimit -v, RLIMIT_AS) of {format_bytes(space[1])}")
    available, container = mem_available("/")
    if container:
        limits.append(f"a container memory limit of {format_bytes(container)}")
    if available > 0:
        limits.append(f"{format_bytes(available)} of memory available now")
    asked = (f"max_bytes={max_bytes} let it read more than there was room for" if max_bytes is not None else
             "memory ran out while it was read")
    return TraceError(f"{path}: out of memory reading the trace ({asked}; {', '.join(limits) or 'no limit found'}); "
                      f"reading takes up to {PEAK_FACTOR}x the JSON's size: raise the limit, free memory, "
                      "or read a smaller trace")


def _too_big(path: Path, what: str, limit: int, why: str, explicit: bool) -> TraceError:
    fix = ("raise max_bytes to read it" if explicit else
           "raise the address-space limit (ulimit -v), or pass max_bytes=<bytes> to read it anyway" if "RLIMIT_AS" in why
           else "free memory, or pass max_bytes=<bytes> to read it anyway")
    return TraceError(f"{path}: {what}, more than the limit of {format_bytes(limit)} ({why}); {fix}")


# -- reading the bytes ---------------------------------------------------------------------------
def _open_regular(path: Path):
    """The file opened for reading, if it is a regular file (a link is followed); else TraceError.
    A FIFO is refused before it is opened, and the descriptor is opened without blocking and
    checked again (the path may have changed in between)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        broken = " (a broken symbolic link)" if os.path.islink(path) else ""
        where = "" if path.is_absolute() else f", looked for in {os.getcwd()}"
        raise TraceError(f"{path}: no such file{broken}; check path={str(path)!r}{where}") from None
    except OSError as exc:  # a loop of symbolic links, a permission, a name too long
        raise TraceError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise TraceError(f"{path}: is a directory; for a folder of per-rank traces use "
                         "read_trace_dir")
    _check_regular(path, st.st_mode)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise TraceError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        _check_regular(path, st.st_mode)
        return os.fdopen(fd, "rb", buffering=0), st.st_size
    except BaseException:
        os.close(fd)
        raise


def _check_regular(path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        what = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise TraceError(f"{path}: is {what}, not a regular file; a trace is read only from a regular file "
                         "(.json or .json.gz)")


def read_bytes(path: Path, max_bytes: int | None = None) -> bytes:
    """The file's bytes, gunzipped when they start with the gzip magic (whatever the suffix), never
    more than ``max_bytes`` (None: :func:`default_max_bytes`) of them."""
    explicit = max_bytes is not None
    if explicit:
        limit, why = max_bytes, f"max_bytes={max_bytes}"
    else:
        limit, why = default_max_bytes()
    fh, size = _open_regular(path)
    with fh:
        try:
            head = fh.read(2)
            if head == _GZIP_MAGIC:
                raw = _inflate(fh, path, size, limit, why, explicit)
            else:
                if size > limit:
                    raise _too_big(path, f"the file is {format_bytes(size)}", limit, why, explicit)
                fh.seek(0)  # one read of the whole file: no second copy to join the parts
                raw = _read_plain(fh, size, path, limit, why, explicit)
        except OSError as exc:
            raise TraceError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    if not raw or raw.isspace():  # isspace stops at the first other byte (strip would copy)
        raise TraceError(f"{path}: the file is empty ({len(raw)} bytes): no trace was written to it")
    return raw


def _read_plain(fh, size: int, path: Path, limit: int, why: str, explicit: bool) -> bytes:
    """A plain file: its stated size in one read, then blocks while it keeps going (a file growing
    as it is read, ``/proc`` files that state no size), never past ``limit``."""
    parts: list[bytes] = []
    total = 0
    while True:
        # the stated size (one read returns at most ~2 GiB on Linux), one byte more to see whether
        # the file goes on, then blocks
        want = size + 1 - total if total <= size else READ_BLOCK
        block = fh.read(min(want, limit + 1 - total))
        if not block:
            break
        parts.append(block)
        total += len(block)
        if total > limit:
            raise _too_big(path, f"the file holds more than {format_bytes(limit)} (it grew while it was read, "
                           f"or its size of {format_bytes(size)} is not its length)", limit, why, explicit)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _inflate(fh, path: Path, size: int, limit: int, why: str, explicit: bool) -> bytes:
    """A gzip file inflated a block at a time, never past ``limit`` bytes of output; several
    members in a row are read as one stream (as ``gzip.decompress`` does)."""
    stated = 0
    if size >= 22:  # a whole gzip member has a 10-byte header and an 8-byte trailer
        fh.seek(-4, os.SEEK_END)
        stated = int.from_bytes(fh.read(4), "little")  # the trailer: the last member's size mod 2**32
    if stated > limit:  # an honest trailer: refuse before inflating anything
        raise _too_big(path, f"the {format_bytes(size)} gzip file inflates to {format_bytes(stated)} "
                       "(its gzip trailer says)", limit, why, explicit)
    fh.seek(0)
    parts: list[bytes] = []
    total = 0
    dec = zlib.decompressobj(16 + zlib.MAX_WBITS)
    data = b""
    try:
        while True:
            if not data:
                data = fh.read(READ_BLOCK)
                if not data:
                    break
            out = dec.decompress(data, READ_BLOCK)
            total += len(out)
            if total > limit:
                raise _too_big(path, f"the {format_bytes(size)} gzip file inflates to more than "
                               f"{format_bytes(limit)} (stopped there)", limit, why, explicit)
            if out:
                parts.append(out)
            data = dec.unconsumed_tail
            if dec.eof:  # the end of a member: another may follow (gzip files may be concatenated)
                rest = dec.unused_data
                while len(rest) < 2 and (more := fh.read(READ_BLOCK)):
                    rest += more
                if not rest.strip(b"\x00"):  # the end, or zeros a tape or a tool padded it with
                    break
                if not rest.startswith(_GZIP_MAGIC):
                    raise TraceError(f"{path}: corrupt gzip data (bytes after the end of the gzip stream)")
                dec = zlib.decompressobj(16 + zlib.MAX_WBITS)
                data = rest
    except zlib.error as exc:
        raise TraceError(f"{path}: corrupt or truncated gzip data ({exc})") from None
    if not dec.eof:
        raise TraceError(f"{path}: corrupt or truncated gzip data (the stream ends before its last block)")
    return parts[0] if len(parts) == 1 else b"".join(parts)


# -- the columns ---------------------------------------------------------------------------------
class _Coder:
    """Codes for one field: each distinct value once, in order of first appearance."""

    __slots__ = ("table", "extra", "codes")

    def __init__(self) -> None:
        self.table: dict[Any, int] = {}
        self.extra: list[Any] = []  # values that cannot be hashed (a list as a pid): one code each
        self.codes = array("i")

    def add(self, values: list[Any]) -> None:
        if self.extra:  # an unhashable value was seen: codes count it too
            self.codes.extend(self._slow(values))
            return
        table = self.table
        put = table.setdefault
        try:
            self.codes.extend([put(v, len(table)) for v in values])  # len(table): the next code
        except TypeError:  # an unhashable value: this slice one by one (the values coded so far keep theirs)
            self.codes.extend(self._slow(values))

    def _slow(self, values: list[Any]) -> list[int]:
        out = []
        for v in values:
            try:
                code = self.table.get(v)
            except TypeError:
                code = None
                hashable = False
            else:
                hashable = True
            if code is None:
                code = len(self.table) + len(self.extra)
                if hashable:
                    self.table[v] = code
                else:
                    self.extra.append((code, v))
            out.append(code)
        return out

    def column(self) -> Strings:
        cats = np.empty(len(self.table) + len(self.extra), dtype=object)
        for v, k in self.table.items():
            cats[k] = v
        for k, v in self.extra:
            cats[k] = v
        codes = np.frombuffer(self.codes, dtype=np.int32) if len(self.codes) else np.zeros(0, np.int32)
        return Strings(codes, cats)


class _Builder:
    """The columns of :class:`Fields`, filled one decoded slice at a time."""

    def __init__(self) -> None:
        self.n = 0
        self.coders = {k: _Coder() for k in ("ph", "cat", "name", "pid", "tid")}
        self.nums = {k: NumberColumn(k) for k in NUMERIC}
        self.objs: dict[str, dict[int, Any]] = {k: {} for k in _OBJECTS}

    def add(self, ph, cat, name, pid, tid, nums: dict[str, list[Any]], objs: dict[str, list[Any]]) -> None:
        lo = self.n
        for key, vals in (("ph", ph), ("cat", cat), ("name", name), ("pid", pid), ("tid", tid)):
            self.coders[key].add(vals)
        for key, vals in nums.items():
            self.nums[key].append(vals)
        for key, vals in objs.items():
            if vals.count(None) != len(vals):  # the common case, all absent, costs one C loop
                self.objs[key].update((lo + i, v) for i, v in enumerate(vals) if v is not None)
        self.n += len(ph)

    def fields(self, top: dict[str, Any]) -> Fields:
        cols = {k: c.column() for k, c in self.coders.items()}
        nums = {k: c.finish(self.n) for k, c in self.nums.items()}
        bad = {k: c.bad for k, c in self.nums.items() if c.bad}
        args = {**{k: nums[k] for k in _ARG_NUMBERS}, **self.objs}
        return Fields(self.n, cols["ph"], cols["cat"], cols["name"], cols["pid"], cols["tid"], nums["ts"],
                      nums["dur"], args, top, bad)


def load_fields(path: Path, *, max_bytes: int | None = None) -> Fields:
    """Parse ``path`` into :class:`Fields` (msgspec when available), reading at most ``max_bytes``."""
    raw = read_bytes(path, max_bytes)
    if HAVE_MSGSPEC:
        return _fast(raw, path)
    return _slow(raw, path)


def _fast(raw: bytes, path: Path) -> Fields:
    """msgspec: the syntax checked in C, then typed decoding slice by slice into compact columns."""
    try:
        top = _TOP.decode(raw)
    except msgspec.ValidationError:  # valid JSON, but not an object: the array form, or no trace
        top = None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise (not_utf8(raw, path) if "UTF-8" in str(exc) else TraceError(f"{path}: not valid JSON ({exc})")) from None
    if top is None:
        first = raw.lstrip(_SPACE)[:1]  # (a copy, but only when the file is not an object)
        if first != b"[":
            got = type(msgspec.json.decode(raw)).__name__
            raise TraceError(f"{path}: not a Chrome trace: expected an object with a 'traceEvents' list, got {got}")
        events, rest = memoryview(raw), {}
    else:
        if "traceEvents" not in top or bytes(memoryview(top["traceEvents"])[:1]) != b"[":
            raise TraceError(f"{path}: not a Chrome trace: expected an object with a 'traceEvents' list, "
                             f"got keys {sorted(top)[:6]}")
        events = memoryview(top.pop("traceEvents"))
        try:
            rest = {k: msgspec.json.decode(v) for k, v in top.items()}
        except (msgspec.DecodeError, RecursionError) as exc:
            raise (not_utf8(raw, path) if "UTF-8" in str(exc) else
                   TraceError(f"{path}: not valid JSON ({exc})")) from None
    out = _Builder()
    empty = _Args()
    try:
        for evs in _slices(events, path, out):
            _add(out, evs, empty)
            del evs
    except _NotUTF8:
        raise not_utf8(raw, path) from None
    return out.fields(rest)


def _add(out: _Builder, evs: list, empty: Any) -> None:
    """One slice's records into the columns."""
    args = [e.args for e in evs]
    args = [empty if a is None else a for a in args]
    nums = {"ts": [e.ts for e in evs], "dur": [e.dur for e in evs]}
    nums.update({key: list(map(attrgetter(key), args)) for key in _ARG_NUMBERS})
    out.add([e.ph for e in evs], [e.cat for e in evs], [e.name for e in evs], [e.pid for e in evs],
            [e.tid for e in evs], nums, {key: list(map(attrgetter(key), args)) for key in _OBJECTS})


class _NotUTF8(Exception):
    """A slice's strings are not UTF-8 (:func:`not_utf8` finds where)."""


def not_utf8(raw: bytes, path: Path) -> TraceError:
    """The error for a file whose bytes are not UTF-8: where the first bad byte is (an incremental
    decode, a block at a time: no copy of the file)."""
    dec = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(raw)
    for at in range(0, len(raw), READ_BLOCK):
        try:
            dec.decode(view[at:at + READ_BLOCK], final=at + READ_BLOCK >= len(raw))
        except UnicodeDecodeError as exc:
            # the decoder holds back at most 3 bytes of an unfinished character between blocks
            start = at + exc.start - len(dec.getstate()[0])
            return _utf8_error(path, raw, max(start, 0))
    return TraceError(f"{path}: not UTF-8 JSON (a string is not valid UTF-8)")


def _utf8_error(path: Path, raw: bytes, offset: int) -> TraceError:
    bad = raw[offset:offset + 1].hex()
    return TraceError(f"{path}: not UTF-8 JSON: byte {offset} (0x{bad}) is not valid UTF-8; a Chrome trace is "
                      "UTF-8 JSON: write it as UTF-8 again (e.g. iconv -f latin1 -t utf-8)")


def _slices(events: memoryview, path: Path, out: _Builder):
    """The decoded records of each slice of the events array (the array's text, brackets
    included), cut between two events about every :data:`CHUNK_BYTES`; ``out.n`` counts the
    events taken so far (for the index in an error)."""
    lo, hi = 0, len(events)
    while lo < hi and events[lo] in _SPACE:
        lo += 1
    while hi > lo and events[hi - 1] in _SPACE:
        hi -= 1
    lo, hi = lo + 1, hi - 1  # inside the brackets
    pos = lo
    first = size = min(CHUNK_BYTES, max((hi - lo) // 32, MIN_CHUNK_BYTES))
    while pos < hi:
        end = nxt = hi
        if hi - pos > size:
            m = _SEP.search(events, pos + size, hi)
            if m is not None:
                end, nxt = m.start() + 1, m.end() - 1  # after this event's '}', at the next one's '{'
        piece = b"".join((b"[", events[pos:end], b"]"))
        if piece.strip(b"[] \t\r\n") == b"":
            return
        try:
            evs = _DECODER.decode(piece)
        except msgspec.ValidationError as exc:  # an event (or its args) that is not an object
            raise TraceError(f"{path}: {_which(exc, out.n)}") from None
        except (msgspec.DecodeError, RecursionError) as exc:
            if "UTF-8" in str(exc):  # the events' syntax was checked as raw bytes; their strings now
                raise _NotUTF8 from None
            if end == hi:  # the whole document parsed, so only depth can fail a whole tail
                raise TraceError(f"{path}: JSON nested too deeply to be a Chrome trace ({exc})") from None
            size *= 2  # the cut fell inside an event (a '},{' in a string or nested list): cut later
            continue
        del piece
        yield evs
        size = first
        pos = nxt


_AT = re.compile(r"got `(\w+)` - at `\$\[(\d+)\](\.args)?")


def _which(exc: Exception, first: int) -> str:
    """The event a typed decode refused, as the stdlib path words it."""
    m = _AT.search(str(exc))
    if m is None:
        return f"malformed trace event data ({exc})"
    got, i, args = m.group(1), first + int(m.group(2)), m.group(3)
    return f"traceEvents[{i}]{'.args' if args else ''} is a {got}, expected an object"


def _slow(raw: bytes, path: Path) -> Fields:
    """The standard library's json: a dict per event, then the same columns."""
    try:
        doc = json.loads(raw)
    except RecursionError:
        raise TraceError(f"{path}: JSON nested too deeply to be a Chrome trace") from None
    except UnicodeDecodeError as exc:
        raise _utf8_error(path, raw, exc.start) from None
    except ValueError as exc:
        raise TraceError(f"{path}: not valid JSON ({exc})") from None
    if isinstance(doc, list):  # the JSON-array form of the format
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        got = type(doc).__name__ if not isinstance(doc, dict) else f"keys {sorted(doc)[:6]}"
        raise TraceError(f"{path}: not a Chrome trace: expected an object with a 'traceEvents' list, got {got}")
    events = doc.pop("traceEvents")
    if set(map(type, events)) - {dict}:
        i = next(i for i, e in enumerate(events) if type(e) is not dict)
        raise TraceError(f"{path}: traceEvents[{i}] is a {type(events[i]).__name__}, expected an object")
    args = [e.get("args") for e in events]
    for i, a in enumerate(args):
        if a is not None and type(a) is not dict:
            raise TraceError(f"{path}: traceEvents[{i}].args is a {type(a).__name__}, expected an object")
    none: dict[str, Any] = {}
    args = [a if a is not None else none for a in args]
    out = _Builder()
    nums = {k: [e.get(k, NUMERIC[k][1]) for e in events] for k in ("ts", "dur")}
    nums.update({k: [a.get(k, NUMERIC[k][1]) for a in args] for k in _ARG_NUMBERS})
    out.add([e.get("ph") for e in events], [e.get("cat") for e in events], [e.get("name", "") for e in events],
            [e.get("pid", 0) for e in events], [e.get("tid", 0) for e in events], nums,
            {k: [a.get(k) for a in args] for k in _OBJECTS})
    return out.fields(doc)
