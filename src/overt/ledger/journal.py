"""The SQLite ledger's journal: the file a record is committed to first.

A commit is one ``os.write`` of a frame to an append-only file beside the
database (``<db>-overt-journal``); a feeder (:mod:`.feeder`) then copies the
frames into SQLite, several at a time. A record is on the record once its frame
is written: as durable as a commit under SQLite's ``synchronous=NORMAL`` (in the
OS before the next effect, no fsync), at a fraction of the cost, since SQLite no
longer writes every b-tree page a commit touches on the turn's path.

**Format.** A frame is an 8-byte header (payload length, CRC-32 of the payload,
both little-endian ``uint32``) and a payload: a dict of lists, strings, ints
and ``None`` in ``marshal`` format version 4. ``marshal`` is what keeps a
commit cheap (one call, about 1 µs a frame, where JSON took 9: the entries'
data is JSON text already, and JSON would escape every quote of it again). Its
format is Python's own; the base frame names the Python that wrote the file,
and a frame another Python cannot read is an error naming it, never skipped.
The first frame of a file is its *base*, ``{"base": [seq, hash], "python":
"3.11"}``: the chain head SQLite already held when the file was started. Every
later frame is a batch, exactly as it will be stored: ``{"entries": [[seq, id,
kind, at, turn_id, session_id, data, prev_hash, hash], ...], "contents": [[key,
seq, digest, body, created_at], ...], "rows": [[table, [column, ...], [value,
...]], ...], "prune": through_seq}`` (keys other than ``entries`` optional).

**One order.** Every append, from every process, holds an exclusive ``flock`` on
the journal while it reads the head, chains and writes, so the chain is one
sequence. A process caches the head and the offset it has read to; after taking
the lock it reads only what other processes appended since.

**Crashes.** A process killed mid-write leaves a torn last frame (short, or its
CRC does not match); the next appender, holding the lock, cuts it off before
writing. A bad frame anywhere else is corruption and is never skipped: reading
raises :class:`~overt.errors.LedgerError` and nothing more is appended.

**Rotation.** Once SQLite holds every frame, the journal is replaced (under the
lock) by a new file holding only a base; a process whose file was replaced sees
it unlinked (``st_nlink == 0``) and opens the new one.
"""

from __future__ import annotations

import fcntl
import marshal
import os
import struct
import sys
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, overload

from overt.errors import LedgerError

HEADER = struct.Struct("<II")
MAX_PAYLOAD = 1 << 30
SUFFIX = "-overt-journal"

Head = tuple[int, str]
Payload = dict[str, Any]


def journal_path(db_path: str) -> str:
    return db_path + SUFFIX


MARSHAL_VERSION = 4
PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"


def encode(payload: Payload) -> bytes:
    """A frame holding ``payload``.

    Raises:
        LedgerError: the payload holds something other than dicts, lists,
            strings, numbers and ``None``, or is too large; nothing is written.
    """
    try:
        body = marshal.dumps(payload, MARSHAL_VERSION)
    except ValueError as exc:
        raise LedgerError(f"a record cannot be written to the journal: {exc}") from exc
    if len(body) > MAX_PAYLOAD:
        raise LedgerError(f"a record of {len(body)} bytes is larger than a journal frame "
                          f"holds ({MAX_PAYLOAD})")
    return HEADER.pack(len(body), zlib.crc32(body)) + body


def base_frame(head: Head) -> bytes:
    return encode({"base": list(head), "python": PYTHON})


def decode(data: bytes, start: int, path: str) -> tuple[list[Payload], int, bool]:
    """The whole frames of ``data`` (bytes read from offset ``start`` of the file).

    Returns the payloads, how many bytes they span, and whether the bytes after
    them are a torn frame (a short or mismatching last frame: a writer died
    mid-write) rather than nothing.

    Raises:
        LedgerError: a frame before the last does not match its checksum or is
            not a payload: the journal is corrupt.
    """
    payloads: list[Payload] = []
    pos, end = 0, len(data)
    while pos < end:
        if end - pos < HEADER.size:
            return payloads, pos, True
        length, crc = HEADER.unpack_from(data, pos)
        stop = pos + HEADER.size + length
        if length > MAX_PAYLOAD:
            torn = True
        elif stop > end:
            return payloads, pos, True
        else:
            body = data[pos + HEADER.size:stop]
            torn = zlib.crc32(body) != crc
        if torn:
            if stop >= end:
                return payloads, pos, True
            raise LedgerError(f"journal {path} is corrupt at byte {start + pos}: a frame "
                              "does not match its checksum and more frames follow it")
        try:
            payload = marshal.loads(body)
        except (ValueError, EOFError, TypeError) as exc:
            raise LedgerError(f"journal {path}: the frame at byte {start + pos} matches its "
                              f"checksum but Python {PYTHON} cannot read it ({exc}); open the "
                              "ledger with the Python named in the journal's first frame"
                              ) from exc
        if not isinstance(payload, dict):
            raise LedgerError(f"journal {path} is corrupt at byte {start + pos}: "
                              "a frame that is not an object")
        payloads.append(payload)
        pos = stop
    return payloads, pos, False


@overload
def head_of(payload: Payload, current: Head) -> Head: ...
@overload
def head_of(payload: Payload, current: Head | None) -> Head | None: ...
def head_of(payload: Payload, current: Head | None) -> Head | None:
    """The chain head after ``payload`` (a base frame, or a batch chained onto ``current``)."""
    base = payload.get("base")
    if base is not None:
        return int(base[0]), str(base[1])
    entries = payload.get("entries") or ()
    if entries:
        last = entries[-1]
        return int(last[0]), str(last[8])
    return current


def _identity(stat: os.stat_result) -> tuple[int, int]:
    """Which file ``stat`` describes: ``(st_dev, st_ino)``, so that offsets into a
    rotated journal are never taken for offsets into its successor."""
    return stat.st_dev, stat.st_ino


class Journal:
    """The appending side of one process: holds the lock, knows the head, writes frames.

    Thread-safe: threads of one process take turns (a lock of their own, since
    ``flock`` does not exclude threads sharing a file).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._thread_lock = threading.Lock()
        self._fd = -1
        self._file = (0, 0)  # (st_dev, st_ino) of the file open as _fd
        self._end = 0  # the bytes of the file read (or written) by this process
        self._head: Head | None = None
        self._closed = False
        self.reader: JournalReader | None = None  # told of each frame written

    @classmethod
    def open(cls, path: str, base: Head) -> Journal:
        """Open the journal at ``path``, starting it with ``base`` (SQLite's head)
        if there is none.

        Raises:
            LedgerError: the file cannot be opened, or is corrupt.
        """
        journal = cls(path)
        with journal._thread_lock:
            journal._fd = journal._open_fd()
            size = journal._flock().st_size
            try:
                journal._read_tail(size)
                if journal._end == 0:  # new, or its base frame was torn
                    journal._write(base_frame(base), base)
            finally:
                journal._unflock()
        return journal

    def _open_fd(self) -> int:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            self._file = _identity(os.fstat(fd))
        except OSError as exc:
            raise LedgerError(f"cannot open journal {self.path}: {exc}") from exc
        return fd

    def _flock(self) -> os.stat_result:
        """Take the file lock, following the journal to a new file if it was rotated;
        returns the locked file's ``fstat``."""
        while True:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            stat = os.fstat(self._fd)
            if stat.st_nlink > 0:
                return stat
            # Rotated while we waited: the path names a new file; read it from its base.
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = self._open_fd()
            self._end, self._head = 0, None

    @property
    def end(self) -> int:
        """The bytes of the file this process has read or written."""
        return self._end

    def _unflock(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    @contextmanager
    def appending(self) -> Iterator[Head]:
        """Hold the journal for one append; yields the chain head to chain onto.

        Raises:
            LedgerError: the journal is closed, corrupt or unreadable.
        """
        with self._thread_lock:
            if self._closed:
                raise LedgerError(f"journal {self.path} is closed")
            try:
                size = self._flock().st_size
            except OSError as exc:
                raise LedgerError(f"cannot lock journal {self.path}: {exc}") from exc
            try:
                head = self._read_tail(size)
                if head is None:
                    raise LedgerError(f"journal {self.path} has no base frame")
                yield head
            finally:
                self._unflock()

    def _read_tail(self, size: int) -> Head | None:
        """Read what other processes appended since this one last looked (the file
        is ``size`` bytes); cut off a torn last frame (the lock is held, so no one
        is writing it)."""
        if size == self._end and self._head is not None:
            return self._head
        if size < self._end:
            self._end, self._head = 0, None  # cut back by someone else: read it again
        try:
            data = os.pread(self._fd, size - self._end, self._end)
        except OSError as exc:
            raise LedgerError(f"cannot read journal {self.path}: {exc}") from exc
        payloads, used, torn = decode(data, self._end, self.path)
        for payload in payloads:
            self._head = head_of(payload, self._head)
        self._end += used
        if torn:
            self._cut_back()
        return self._head

    def write(self, frame: bytes, head: Head, payload: Payload) -> None:
        """Append ``frame`` (of ``payload``, whose last entry is ``head``); call inside
        :meth:`appending`. The :attr:`reader` is handed ``payload``, so that it
        need not read back and decode what this process wrote.

        Raises:
            LedgerError: the frame could not be written whole; the journal is as before.
        """
        start = self._end
        self._write(frame, head)
        if self.reader is not None:
            self.reader.offer(self._file, start, self._end, payload)

    def _write(self, frame: bytes, head: Head) -> None:
        try:
            written = os.write(self._fd, frame)
        except OSError as exc:
            self._cut_back()
            raise LedgerError(f"cannot write journal {self.path}: {exc}") from exc
        if written != len(frame):
            self._cut_back()
            raise LedgerError(f"cannot write journal {self.path}: {written} of "
                              f"{len(frame)} bytes written")
        self._end += written
        self._head = head

    def _cut_back(self) -> None:
        """Remove a partly written frame (a crash, a full disk): the file ends at the
        last whole frame."""
        try:
            os.ftruncate(self._fd, self._end)
        except OSError as exc:
            # The torn frame stays; the next appender cuts it off, as after a crash.
            raise LedgerError(f"cannot cut a torn frame off journal {self.path}: "
                              f"{exc}") from exc

    def rotate_if(self, fed: JournalReader, *, blocking: bool) -> bool:
        """Replace the journal by a new one holding only its base, if SQLite holds
        every frame: ``fed`` is the feeder's reader, which the caller has seen
        store all it read; it must have read this very file to its end. Returns
        whether it rotated. Without ``blocking``, gives up at once if another
        thread or process holds the journal.

        Raises:
            LedgerError: the new file could not be written; the old one is kept.
        """
        if not self._thread_lock.acquire(blocking=blocking):
            return False
        try:
            if self._closed:
                return False
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                return False
            try:
                stat = os.fstat(self._fd)
                if stat.st_nlink == 0 or not fed.has_read(stat):
                    return False
                head = self._read_tail(stat.st_size)
                if head is None:
                    return False
                self.rebase(head)
                return True
            finally:
                self._unflock()
        finally:
            self._thread_lock.release()

    def rebase(self, base: Head) -> None:
        """Put a new file holding only ``base`` in the journal's place: SQLite's head,
        when it holds every frame (a rotation) or more than the journal knows (a
        database written without one). Call with both locks held (inside
        :meth:`appending`); they are held on the new file when it returns (others may
        have appended to it meanwhile: they are read as any other process's frames).

        Raises:
            LedgerError: the new file could not be written; the old one is kept.
        """
        tmp = self.path + ".new"
        frame = base_frame(base)
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC,
                         0o600)
        except OSError as exc:
            raise LedgerError(f"cannot rotate journal {self.path}: {exc}") from exc
        try:
            if os.write(fd, frame) != len(frame):
                raise OSError("short write")
            os.replace(tmp, self.path)
        except OSError as exc:
            os.close(fd)
            raise LedgerError(f"cannot rotate journal {self.path}: {exc}") from exc
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.close(self._fd)  # releases the old file's lock: its waiters find it unlinked
        self._fd, self._end, self._head = fd, len(frame), base
        self._file = _identity(os.fstat(fd))

    def close(self) -> None:
        with self._thread_lock:
            if not self._closed:
                self._closed = True
                os.close(self._fd)


class JournalReader:
    """The reading side: the frames appended since the last read, for the feeder.

    Needs no lock: frames are only ever appended, and a torn last frame is left
    for the next read (its writer may still be writing it).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = -1
        self.offset = 0
        self._file: tuple[int, int] | None = None  # (st_dev, st_ino) of the file read
        self._offered: dict[tuple[int, int, int], tuple[int, Payload]] = {}

    def offer(self, file: tuple[int, int], start: int, end: int, payload: Payload) -> None:
        """The frame at ``start..end`` of ``file`` (``(st_dev, st_ino)``) holds ``payload``."""
        self._offered[(*file, start)] = (end, payload)

    def read_new(self) -> list[Payload]:
        """Whole frames after :attr:`offset`; moves it past them.

        Raises:
            LedgerError: the journal is missing, unreadable or corrupt.
        """
        try:
            if self._fd < 0:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            stat = os.fstat(self._fd)
            if stat.st_nlink == 0:  # rotated: SQLite holds all of the old file
                os.close(self._fd)
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                self.offset = 0
                stat = os.fstat(self._fd)
            if stat.st_size < self.offset:
                self.offset = 0
            file = _identity(stat)
            if file != self._file:
                self._file = file
                self._offered = {k: v for k, v in self._offered.items() if k[:2] == file}
            payloads: list[Payload] = []
            while (offered := self._offered.pop((*file, self.offset), None)) is not None:
                self.offset, payload = offered
                payloads.append(payload)
            if stat.st_size <= self.offset:
                return payloads
            data = os.pread(self._fd, stat.st_size - self.offset, self.offset)
        except OSError as exc:
            raise LedgerError(f"cannot read journal {self.path}: {exc}") from exc
        read, used, _ = decode(data, self.offset, self.path)
        self.offset += used
        payloads.extend(read)
        for key in [k for k in self._offered if k[2] < self.offset]:
            del self._offered[key]  # read from the file after another process's frames
        return payloads

    def has_read(self, stat: os.stat_result) -> bool:
        """Whether this reader has read the file ``stat`` describes to its end."""
        if self._fd < 0:
            return False
        return _identity(os.fstat(self._fd)) == _identity(stat) and self.offset == stat.st_size

    def unread(self) -> bool:
        """Whether the file holds bytes past :attr:`offset` (one ``fstat``)."""
        if self._fd < 0:
            return True
        try:
            stat = os.fstat(self._fd)
        except OSError as exc:
            raise LedgerError(f"cannot read journal {self.path}: {exc}") from exc
        return stat.st_nlink == 0 or stat.st_size != self.offset

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
