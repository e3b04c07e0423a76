"""The KV state of a fixed prompt prefix, kept on disk so a new process starts from it.

Every ``overt ask`` sends the same prefix first: the system prompt and the tool
schemas, thousands of tokens that a small CPU takes seconds to prefill. llama.cpp can copy
its context state (the KV cache of the tokens evaluated so far) out and back
in, so the first process to prefill a prefix writes that state to a file and
later processes load it in a fraction of a second.

A file is keyed by everything that makes the state valid: the weights' SHA-256,
the prefix's tokens, ``n_ctx``, the llama.cpp bindings' version and the CPU
features the build uses. The file
name is the digest of that key; the header repeats the key and carries the
state's own SHA-256, so a file that is truncated, corrupt, written by another
build or for another prefix is refused (with a log line) and rebuilt, never
loaded and never a crash.

A process keeps the last :data:`HELD` states it loaded or saved in memory as well,
verified once: each turn's answer (the system prompt without the tools) pushes the
call's system turn out of a loaded model's KV cache, and reading and hashing the
model's state from disk again each time is a noticeable part of a turn.

File layout (one file, written to a temporary name then renamed into place):
``OVERTKV1``, a 4-byte big-endian header length, the header (canonical JSON),
then the prefix tokens (little-endian int32) and the state bytes.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import logging
import os
import struct
import tempfile
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("overt.models.prefix_cache")

MAGIC = b"OVERTKV1"
MIN_PREFIX_TOKENS = 64
"""A shorter prefix is prefilled faster than its file is read: not cached."""
HELD = 2
"""States kept in memory: the call turn's prefix, and one more for a runtime whose
channels offer different tools."""


def tokens_digest(tokens: Sequence[int]) -> str:
    """SHA-256 of ``tokens`` as little-endian int32 values."""
    return hashlib.sha256(_pack(tokens)).hexdigest()


def _pack(tokens: Sequence[int]) -> bytes:
    return struct.pack(f"<{len(tokens)}i", *tokens)


@dataclass(frozen=True, slots=True)
class PrefixKey:
    """What a saved state is valid for."""

    model_sha256: str
    prefix_sha256: str
    n_tokens: int
    n_ctx: int
    llama_cpp_version: str
    build: str = ""
    """The llama.cpp build's CPU features (``llama_print_system_info``): an AVX2 and an
    AVX-512 build round differently, so a state one saved is not the other's."""

    def as_dict(self) -> dict[str, Any]:
        return {"model_sha256": self.model_sha256, "prefix_sha256": self.prefix_sha256,
                "n_tokens": self.n_tokens, "n_ctx": self.n_ctx,
                "llama_cpp_version": self.llama_cpp_version, "build": self.build}

    @property
    def file_name(self) -> str:
        blob = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return f"{hashlib.sha256(blob.encode()).hexdigest()[:32]}.kv"


class PrefixCache:
    """Saved prefix states of one model in ``directory``.

    ``load``/``save`` move state in and out of a ``llama_cpp.Llama``; the pure
    file half (:meth:`read`, :meth:`write`) is separate so it can be tested
    without weights.
    """

    def __init__(self, directory: str | os.PathLike[str], *, model_sha256: str, n_ctx: int,
                 llama_cpp_version: str, build: str = "") -> None:
        self.directory = Path(directory)
        self.model_sha256 = model_sha256
        self.n_ctx = n_ctx
        self.llama_cpp_version = llama_cpp_version
        self.build = build
        self._held: OrderedDict[str, Any] = OrderedDict()  # file name -> verified state

    def key(self, tokens: Sequence[int]) -> PrefixKey:
        return PrefixKey(self.model_sha256, tokens_digest(tokens), len(tokens), self.n_ctx,
                         self.llama_cpp_version, self.build)

    def path(self, tokens: Sequence[int]) -> Path:
        return self.directory / self.key(tokens).file_name

    # -- the file --------------------------------------------------------------

    def write(self, tokens: Sequence[int], state: bytes) -> Path:
        """Write ``state`` for the prefix ``tokens``; returns the file's path.

        Raises:
            OSError: the directory or file cannot be written.
        """
        key = self.key(tokens)
        header = {**key.as_dict(), "state_size": len(state),
                  "state_sha256": hashlib.sha256(state).hexdigest()}
        head = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.directory / key.file_name
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".kv-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(MAGIC + struct.pack(">I", len(head)) + head)
                out.write(_pack(tokens))
                out.write(state)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return target

    def read(self, tokens: Sequence[int]) -> bytes | None:
        """The saved state of the prefix ``tokens``, or None when there is none or the
        file does not hold exactly it (each refusal is logged with its reason)."""
        path = self.path(tokens)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("prefix cache %s unreadable, rebuilding: %s", path, exc)
            return None
        problem, state = self._parse(data, tokens)
        if problem is not None:
            log.warning("prefix cache %s refused, rebuilding: %s", path, problem)
            return None
        return state

    def _parse(self, data: bytes, tokens: Sequence[int]) -> tuple[str | None, bytes]:
        if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 4:
            return "not a prefix cache file", b""
        (size,) = struct.unpack(">I", data[len(MAGIC):len(MAGIC) + 4])
        start = len(MAGIC) + 4
        try:
            header = json.loads(data[start:start + size])
        except (ValueError, UnicodeDecodeError) as exc:
            return f"unreadable header: {exc}", b""
        if not isinstance(header, dict):
            return "unreadable header", b""
        wanted = self.key(tokens).as_dict()
        for name, value in wanted.items():
            if header.get(name) != value:
                return f"{name} is {header.get(name)!r}, not {value!r}", b""
        packed = _pack(tokens)
        body = data[start + size:]
        if body[:len(packed)] != packed:
            return "its tokens differ from the prefix's", b""
        state = body[len(packed):]
        if len(state) != header.get("state_size"):
            return f"state is {len(state)} bytes, header says {header.get('state_size')}", b""
        if hashlib.sha256(state).hexdigest() != header.get("state_sha256"):
            return "state digest does not match", b""
        return None, state

    # -- llama.cpp -------------------------------------------------------------

    def load(self, llm: Any, tokens: Sequence[int]) -> str | None:
        """Put the saved state of ``tokens`` into ``llm``: ``"memory"`` (held by this
        process) or ``"disk"`` where it came from, or None when there is none (or it
        is refused), leaving ``llm`` reset."""
        import llama_cpp

        name = self.key(tokens).file_name
        buffer = self._held.get(name)
        source = "memory"
        if buffer is None:
            state = self.read(tokens)
            if state is None:
                return None
            buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
            source = "disk"
        llm.reset()
        if llama_cpp.llama_state_set_data(llm.ctx, buffer, len(buffer)) != len(buffer):
            log.warning("prefix cache %s: llama.cpp refused the state, rebuilding",
                        self.path(tokens))
            self._held.pop(name, None)
            llm.reset()
            return None
        llm.input_ids[:len(tokens)] = tokens
        llm.n_tokens = len(tokens)
        self._hold(name, buffer)
        return source

    def _hold(self, name: str, buffer: Any) -> None:
        self._held[name] = buffer
        self._held.move_to_end(name)
        while len(self._held) > HELD:
            self._held.popitem(last=False)

    def save(self, llm: Any, tokens: Sequence[int]) -> None:
        """Write ``llm``'s state, which must hold exactly ``tokens``; a failure to write
        is logged (the next process prefills again)."""
        import llama_cpp

        size = llama_cpp.llama_state_get_size(llm.ctx)
        buffer = (ctypes.c_uint8 * size)()
        n = llama_cpp.llama_state_get_data(llm.ctx, buffer, size)
        state = ctypes.string_at(buffer, n)
        held = buffer if n == size else (ctypes.c_uint8 * n).from_buffer_copy(state)
        self._hold(self.key(tokens).file_name, held)
        try:
            self.write(tokens, state)
        except OSError as exc:
            log.warning("prefix cache not written to %s: %s", self.directory, exc)
