"""A size-capped disk for one sandbox: a sparse ext4 image, loop-mounted on the host.

The Docker engine here stores containers on overlay2 over ext4, which cannot cap a container's
disk (``--storage-opt size`` needs XFS or ext4 project quotas, and this kernel has no quota
support; btrfs qgroups were tried and let writes through). So a sandbox's root filesystem is
read-only and every path it may write (the image's ``worldtrace.writable`` label) is a folder
of one small ext4 filesystem made for that sandbox: a write beyond the cap fails inside the
sandbox with "No space left on device", and the host's disk holds at most the cap.

A disk is a folder ``<DISK_ROOT>/<name>/`` holding ``disk.img`` (sparse, so it costs only what
was written), the mount point ``mnt/`` and ``owner`` (the pid and host that made it, for
:func:`collect_orphans`). Making one costs about 20 ms (``mkfs.ext4`` and ``mount``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
from pathlib import Path

from worldtrace.sandboxes.owners import pid_alive
from worldtrace.schemas.errors import SetupError

DISK_ROOT_ENV = "WORLDTRACE_DISK_DIR"
DEFAULT_DISK_ROOT = Path("/var/lib/worldtrace/disks")


class DiskError(SetupError, RuntimeError):
    """A disk could not be made or released; the message says what to fix."""


def disk_root() -> Path:
    """Return the folder that holds the sandboxes' disks (``$WORLDTRACE_DISK_DIR`` wins)."""
    return Path(os.environ.get(DISK_ROOT_ENV) or DEFAULT_DISK_ROOT)


def _run(argv: list[str], what: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise DiskError(f"{what} failed ({' '.join(argv)}): {result.stderr.strip()[-500:]}")


DISK_HASH_SEED = "5d2f3a1e-7c44-4b1f-9a8e-2b6c0d9e4f17"
"""The directory-hash seed (and UUID) of every sandbox disk. ext4 lists a directory in the
order of its names' hashes, and mkfs draws the seed at random: each episode's fresh disk
listed the same files in another order (`find`, `ls -f`, `os.listdir`, `grep -r`), and the
exploring walks of two same-seed runs parted there. One seed is what one machine's disk
has."""


class SandboxDisk:
    """One sandbox's capped filesystem; :meth:`path` gives a folder on it per writable path."""

    def __init__(self, name: str, size_mb: int, root: Path | None = None) -> None:
        self.name = name
        self.size_mb = size_mb
        self.folder = (root or disk_root()) / name
        self.image = self.folder / "disk.img"
        self.mount_point = self.folder / "mnt"

    def create(self) -> SandboxDisk:
        """Make, format and mount the disk; raise :class:`DiskError` saying how to fix it."""
        if os.geteuid() != 0:
            raise DiskError(
                "a sandbox disk cap needs root (it loop-mounts a small filesystem); run as "
                "root, or set the sandbox limit `disk_mb: null` to run without a disk cap"
            )
        self.mount_point.mkdir(parents=True, exist_ok=False)
        (self.folder / "owner").write_text(f"{os.getpid()} {socket.gethostname()}\n")
        try:
            with self.image.open("wb") as handle:
                handle.truncate(self.size_mb * 1024 * 1024)
            # No journal and no reserved blocks: the sandbox gets the whole cap, and a disk
            # that lives for one episode needs no crash recovery.
            _run(
                [
                    *("mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal"),
                    *("-U", DISK_HASH_SEED, "-E", f"hash_seed={DISK_HASH_SEED}"),
                    str(self.image),
                ],
                "formatting a sandbox disk",
            )
            _run(
                ["mount", "-o", "loop,nosuid,nodev", str(self.image), str(self.mount_point)],
                "mounting a sandbox disk",
            )
        except BaseException:
            self.release()
            raise
        with contextlib.suppress(FileNotFoundError):
            (self.mount_point / "lost+found").rmdir()
        return self

    def path(self, index: int) -> Path:
        """Return the folder on the disk that backs the sandbox's ``index``-th writable path."""
        return self.mount_point / f"w{index}"

    def release(self) -> None:
        """Unmount the disk and delete it; safe to call more than once."""
        release_folder(self.folder)


def _mounted(point: Path) -> bool:
    target = str(point.resolve()) if point.exists() else str(point)
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) > 1 and fields[1] == target:
                return True
    return False


def release_folder(folder: Path) -> None:
    """Unmount and delete the disk in ``folder`` (a lazy unmount if it is still busy)."""
    point = folder / "mnt"
    if _mounted(point):
        result = subprocess.run(["umount", str(point)], capture_output=True, check=False)
        if result.returncode != 0:
            # Still in use (a container being removed): detach now, freed when unused.
            subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)
    shutil.rmtree(folder, ignore_errors=True)


def _owner_alive(folder: Path) -> bool:
    try:
        pid_text, host = (folder / "owner").read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return False
    if host != socket.gethostname():
        return True  # another machine's disk on shared storage is not ours to judge
    return pid_alive(pid)


def collect_orphans(in_use: set[str], root: Path | None = None) -> list[str]:
    """Release every disk whose name is not ``in_use`` and whose maker has died."""
    base = root or disk_root()
    if not base.is_dir():
        return []
    released = []
    for folder in sorted(base.iterdir()):
        if folder.is_dir() and folder.name not in in_use and not _owner_alive(folder):
            release_folder(folder)
            released.append(folder.name)
    return released
