"""The prefix cache file: keyed, verified, refused with a log line unless exactly right."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from overt.models.prefix_cache import PrefixCache

TOKENS = list(range(100, 400))
STATE = bytes(range(256)) * 64


def _cache(directory: Path, **key: object) -> PrefixCache:
    options: dict[str, object] = {"model_sha256": "a" * 64, "n_ctx": 4096,
                                  "llama_cpp_version": "0.3.36", **key}
    return PrefixCache(directory, **options)  # type: ignore[arg-type]


def test_a_written_state_reads_back_for_the_same_prefix(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    path = cache.write(TOKENS, STATE)
    assert path.parent == tmp_path and path.suffix == ".kv"
    assert cache.read(TOKENS) == STATE


def test_another_prefix_finds_no_state(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    cache.write(TOKENS, STATE)
    assert cache.read([*TOKENS, 7]) is None


@pytest.mark.parametrize("key", [{"model_sha256": "b" * 64}, {"n_ctx": 2048},
                                 {"llama_cpp_version": "0.3.99"},
                                 {"build": "CPU : AVX = 1 | AVX2 = 1"}])
def test_a_state_saved_for_other_weights_context_bindings_or_build_is_not_found(
        tmp_path: Path, key: dict[str, object]) -> None:
    _cache(tmp_path).write(TOKENS, STATE)
    assert _cache(tmp_path, **key).read(TOKENS) is None


def test_a_truncated_file_is_refused_with_a_log_line(tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    cache = _cache(tmp_path)
    path = cache.write(TOKENS, STATE)
    path.write_bytes(path.read_bytes()[:-10])
    with caplog.at_level(logging.WARNING, logger="overt.models.prefix_cache"):
        assert cache.read(TOKENS) is None
    assert "refused, rebuilding: state is" in caplog.text


def test_a_flipped_byte_in_the_state_is_refused(tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    cache = _cache(tmp_path)
    path = cache.write(TOKENS, STATE)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="overt.models.prefix_cache"):
        assert cache.read(TOKENS) is None
    assert "state digest does not match" in caplog.text


@pytest.mark.parametrize("content", [b"", b"garbage", b"OVERTKV1\x00\x00\x00\x05{bad}"])
def test_a_file_that_is_not_a_prefix_cache_is_refused(tmp_path: Path, content: bytes,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    cache = _cache(tmp_path)
    cache.path(TOKENS).parent.mkdir(parents=True, exist_ok=True)
    cache.path(TOKENS).write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="overt.models.prefix_cache"):
        assert cache.read(TOKENS) is None
    assert "refused, rebuilding" in caplog.text


def test_a_file_holding_other_tokens_under_this_name_is_refused(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    other = cache.write([*TOKENS[:-1], 9], STATE)
    other.rename(cache.path(TOKENS))
    assert cache.read(TOKENS) is None


def test_rewriting_a_prefix_replaces_its_file_whole(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    cache.write(TOKENS, STATE)
    cache.write(TOKENS, b"new state")
    assert cache.read(TOKENS) == b"new state"
    assert [p.name for p in tmp_path.iterdir()] == [cache.path(TOKENS).name]
