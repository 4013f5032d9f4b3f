"""A function's deployment package: what Lambda accepts, and where it unpacks it.

Lambda takes a .zip (given in the request or as an S3 object) and unpacks it into the task root
(``/var/task``) of each execution environment. It refuses an archive with no entry and a file
that is no zip at creation (CreateFunction, UpdateFunctionCode, CloudFormation's
AWS::Lambda::Function): the messages are Lambda's, as it returns them with
InvalidParameterValueException.
"""

from __future__ import annotations

import io
import stat
import zipfile
from pathlib import Path, PurePosixPath

#: Lambda's message for an archive with no entry (the 22-byte zip a CLI makes of an empty folder).
EMPTY_ZIP = "Uploaded file must be a non-empty zip"
#: Lambda's message for a file that is no zip archive.
NOT_A_ZIP = "Could not unzip uploaded file. Please check your file, then try to upload again."


class CodeError(ValueError):
    """Lambda refuses the deployment package (InvalidParameterValueException)."""


def check_zip(data: bytes) -> None:
    """Raise :class:`CodeError` with Lambda's message unless `data` is a zip with an entry."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except zipfile.BadZipFile:
        raise CodeError(NOT_A_ZIP) from None
    if not entries:
        raise CodeError(EMPTY_ZIP)


def unpack(data: bytes, task_root: Path) -> None:
    """Unpack the package into `task_root`, readable (Lambda gives files at least 0444 and folders
    0555); an entry that would land outside it is refused as a corrupt archive."""
    task_root.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for entry in archive.infolist():
            name = PurePosixPath(entry.filename)
            if name.is_absolute() or ".." in name.parts:
                raise CodeError(NOT_A_ZIP)
            target = task_root.joinpath(*name.parts)
            if entry.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(entry))
            mode = (entry.external_attr >> 16) & 0o777
            target.chmod(mode | stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH | stat.S_IWUSR)
