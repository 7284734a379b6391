"""The agent's view of a sandbox: an ordinary machine of the sandbox's size, without our harness.

An image that carries the label ``worldtrace.view=private`` gets, when its sandbox starts, a
set of namespaces the agent's processes live in (the drivers start every agent process there,
with ``nsenter``), made by :data:`SETUP` as root inside the container:

- its own PID namespace with a fresh ``/proc``: ``ps`` and ``top`` show the agent's processes
  only, under a PID 1 named ``/sbin/init`` (a shell that reaps orphans and does nothing else);
  docker-init, the keep-alive ``sleep``, the driver and the tmux clients that carry the
  agent's keystrokes stay outside, and process and job numbers follow the agent's actions
  alone;
- its own mount namespace, whose root is a read-only overlay of the container's root under a
  thin layer of ours (see :data:`INNER`): no ``/.dockerenv``, no Docker layer folders in
  ``mount`` or ``/proc/self/mountinfo``, ``df /`` the disk cap, the paths the image lists in
  ``worldtrace.hidden`` (the driver's folder) not there, the loop device not naming the disk
  image behind it, and ``/proc/meminfo``, ``/proc/cpuinfo`` and ``/proc/loadavg`` describing a
  machine of the sandbox's limits (``free``, ``top``), fixed at its start so that identical
  runs see identical numbers;
- its own cgroup namespace: ``/proc/self/cgroup`` shows ``/``, not the container id;
- its own time namespace, whose boot clock starts with the view: ``uptime`` says how long the
  view has run, and ``ps`` measures ELAPSED and %CPU against the same boot.

``nproc`` follows the container's CPU set, which :class:`~worldtrace.sandboxes.docker.
DockerSandbox` sets to as many cores as the CPU limit (rounded up). Making the namespaces
needs CAP_SYS_ADMIN (and CAP_SYS_TIME for the time namespace's offset), which the container
gets for its root processes only: the agent runs as an unprivileged user with
``no-new-privileges``, so it can never use them. :data:`SETUP` leaves the init's pid in
:data:`PID_FILE` for the drivers. The container's seccomp profile is Docker's default plus
``personality(ADDR_NO_RANDOMIZE)`` (:mod:`~worldtrace.sandboxes.seccomp`), so a driver can start
the agent's processes without address-space randomization (``setarch -R``, as the terminal's
does): what they measure of themselves is then the same in every run.
"""

from __future__ import annotations

import math

VERSION = "2"
"""What the view shows, as recorded in a terminal or swe environment's identity: 2 is the overlay
root (no .dockerenv, no Docker paths in mount, df / the disk cap); 1 the container's own root."""
VIEW_LABEL = "worldtrace.view"
"""Image label: ``private`` gives the sandbox's agent the private view this module makes."""
HIDDEN_LABEL = "worldtrace.hidden"
"""Image label: space-separated paths the agent's view does not show (the driver's folder)."""
INIT_NAME = "init"
"""The command name of the view's PID 1 (its command line is ``/sbin/init``)."""
UNCAPPED_ROOT_MB = 8192
"""What ``df /`` shows in the view of a sandbox without a disk cap (its root is Docker's)."""

# Runs as PID 1 of the new namespaces, as root, then becomes the view's init. Its inputs come
# from the environment (VIEW_*), which the init drops.
#
# The view's root is a read-only overlay of the container's root under one thin layer of ours
# (on a tmpfs, so it is never listable or writable): that layer holds Docker's marker and the
# hidden paths as whiteouts, and copies of the files Docker and the clock bind from the host's
# disk. So `ls -a /` has no .dockerenv, `mount` and /proc/self/mountinfo show one overlay whose
# layers are `/mnt` and `/` (not Docker's layer folders), no bind of ours over /etc or /opt,
# and `df /` the size of that tmpfs, which is the sandbox's disk cap. The overlay is moved onto
# `/` and the init chroots into it: mountinfo lists only mounts under a process's root, so
# Docker's root and everything bound in it stay outside; nsenter and setns(2) into the mount
# namespace land on the overlay (the topmost mount on the namespace's root). pivot_root(2)
# would detach the old root too, but Docker's seccomp profile refuses it.
INNER = r"""
set -e
# Our pid outside, for the harness (sandboxes/view.py PID_FILE): /proc is still the outer one.
read -r outer_pid _ < /proc/self/stat
# -n everywhere: the root filesystem is read-only, there is no mount table to write.
mount -n -t proc -o nosuid,nodev,noexec proc /proc
umount -n /usr/sbin/docker-init 2>/dev/null || true
# The view's own /dev/shm, instead of Docker's (where the harness keeps PID_FILE).
umount -n /dev/shm 2>/dev/null || true
mount -n -t tmpfs -o nosuid,nodev,mode=1777,size=65536k shm /dev/shm
layer=/mnt
mount -n -t tmpfs -o mode=755,size="${VIEW_DISK_MB}m" tmpfs "$layer"
# Mounts under / other than the kernel's folders: a file Docker (or the clock) binds from the
# host's disk becomes a file of the layer; anything else (the sandbox's disk) is bound into the
# view where it was.
: > /dev/shm/.binds
files=()
while read -r target source; do
  case "$target" in /|/proc|/proc/*|/dev|/dev/*|/sys|/sys/*|"$layer") continue ;; esac
  if [ -f "$target" ] && [ "${source#/dev/}" != "$source" ] \
      && [ "${source#/dev/loop}" = "$source" ]; then
    files+=("$target")
  else
    echo "$target" >> /dev/shm/.binds
  fi
done < <(awk '{ for (i = 7; $i != "-"; i++) ; print $5, $(i + 2) }' /proc/self/mountinfo)
# Without a disk cap (an engine on another machine) the writable folders are folders of
# Docker's writable root, not mounts: bound into the view as they are, or the view's
# read-only root would make them read-only.
for path in $VIEW_WRITABLE; do
  if [ -d "$path" ] && ! grep -qxF "$path" /dev/shm/.binds \
      && ! awk -v p="$path" '$5 == p { found = 1 } END { exit !found }' /proc/self/mountinfo; then
    echo "$path" >> /dev/shm/.binds
  fi
done
if [ "${#files[@]}" -gt 0 ]; then
  cp --parents -t "$layer" "${files[@]}"
  chmod 644 "${files[@]/#/$layer}"
fi
# Docker's marker and the paths the image hides: whiteouts (0/0 character devices) in the
# layer, so the overlay shows no such entry at all.
for path in /.dockerenv $VIEW_HIDDEN; do
  if [ -e "$path" ] || [ -L "$path" ]; then
    mkdir -p "$layer${path%/*}"
    mknod "$layer$path" c 0 0
  fi
done
# Times as they are, from here on: the clock library (sandboxes/clock.py) moves what stat reads
# but not what touch sets, so it is kept out of this namespace's remaining processes (the
# view's own /etc/ld.so.preload is the layer's copy).
if [ -f /etc/ld.so.preload ]; then mount -n --bind /dev/null /etc/ld.so.preload; fi
# A file of the layer shows the time of its folder in the image; a folder of the layer is
# what the overlay shows for that folder's mode, owner and times: the image's.
for file in "${files[@]}"; do touch -h -r "${file%/*}/" "$layer$file"; done
find "$layer" -depth -type d | while read -r folder; do
  original="${folder#"$layer"}"
  original="${original:-/}"
  touch -h -r "$original" "$folder"
done
# (Folders made here are root's, 755, as the image's own folders on those paths are.)
new=/media
mount -n -t overlay overlay -o ro,lowerdir="$layer":/ "$new"
mount -n -t proc -o nosuid,nodev,noexec proc "$new/proc"
mount -n --rbind /dev "$new/dev"
mount -n --rbind /sys "$new/sys"
# Docker's tmpfs folders in /sys would show half the host's memory (tmpfs's default size): as
# on any machine, they get half of this one's.
for folder in /sys/fs/cgroup /sys/firmware; do
  mount -n -o remount,size="$VIEW_TMPFS_KB"k "$new$folder" 2>/dev/null || true
done
while read -r target; do mount -n --rbind "$target" "$new$target"; done < /dev/shm/.binds
rm -f /dev/shm/.binds
# The machine's size, fixed at its start: files of a ramfs that stays only in their binds (a
# ramfs has no size, so df does not list it; nothing of it is listable).
mount -n -t ramfs -o mode=755 ramfs "$layer"
put() {  # put NAME CONTENT TARGET: a file of ours over TARGET
  printf '%s' "$2" > "$layer/$1"
  mount -n --bind "$layer/$1" "$3"
}
put meminfo "$VIEW_MEMINFO" "$new/proc/meminfo"
put loadavg "$VIEW_LOADAVG" "$new/proc/loadavg"
put cpuinfo "$(awk -v n="$VIEW_CPUS" 'BEGIN { RS = ""; ORS = "\n\n" } NR <= n' /proc/cpuinfo)
" "$new/proc/cpuinfo"
# The boot time on the episode's clock (sandboxes/clock.py): ps dates a process's START from it.
put stat "$(awk -v shift="$VIEW_BOOT_SHIFT" '$1 == "btime" { $2 += shift } { print }' /proc/stat)
" "$new/proc/stat"
# The sandbox's loop disk would name the image file behind it (its backing_file in sysfs).
awk '{ for (i = 7; $i != "-"; i++) ; if ($(i + 2) ~ /^\/dev\/loop/) print $3 }' \
  /proc/self/mountinfo | sort -u | while read -r device; do
  file="$new/sys/dev/block/$device/loop/backing_file"
  if [ -f "$file" ]; then put backing_file "" "$file"; fi
done
umount -n -l "$layer"
# The overlay becomes the namespace's root (what nsenter and setns enter) and the init's.
cd "$new"
mount -n --move . /
# The init: a shell named init (so its command name is "init") that reads its commands from
# a FIFO nobody writes: it waits forever and reaps the orphans it inherits.
ln -s /bin/bash dev/shm/init
mkfifo -m 600 dev/shm/.fifo
# (bash reads its script from standard input a line at a time: the FIFO is removed on the line
# that makes it standard input.)
printf 'rm -f /dev/shm/init /dev/shm/.boot\nexec 0<>/dev/shm/.fifo; rm -f /dev/shm/.fifo\n' \
  > dev/shm/.boot
echo "ready $outer_pid" >&3
exec 3>&-
exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  chroot . bash -c 'cd / && exec -a /sbin/init /dev/shm/init < /dev/shm/.boot'
"""

PID_FILE = "/dev/shm/view-init.pid"
"""Where :data:`SETUP` leaves the view's init's pid (ours, outside the view), root's alone.

Docker's ``/dev/shm``, which the view replaces with its own: the drivers, outside the view,
read it to enter the view (``nsenter -t PID``); the agent never sees it.
"""

# Runs as root through one exec: starts the namespaces in the background and returns once the
# view's init is about to start (the inner script says so, and its pid, on descriptor 3), or
# says why not.
SETUP = r"""
log=$(mktemp)
ready=$(mktemp -u)
mkfifo -m 600 "$ready"
# A time namespace whose boot clock starts now: /proc/uptime says how long the view has run, and
# the start times of its processes count from the same boot (ps's ELAPSED and %CPU).
up=$(cut -d' ' -f1 /proc/uptime)
setsid unshare --pid --fork --mount --cgroup --time --boottime "-${up%.*}" \
  --propagation private bash -c "$VIEW_INNER" 3>"$ready" </dev/null >/dev/null 2>"$log" &
read -r answer pid < "$ready"
rm -f "$ready"
if [ "$answer" = ready ]; then
  rm -f "$log"
  (umask 077; printf '%s\n' "$pid" > "$VIEW_PID_FILE.part")
  mv "$VIEW_PID_FILE.part" "$VIEW_PID_FILE"
  exit 0
fi
wait
echo "the agent's view could not be made:" >&2; cat "$log" >&2; rm -f "$log"; exit 1
"""


def cpu_count(cpus: float) -> int:
    """The number of cores a sandbox with a CPU limit of ``cpus`` shows (rounded up)."""
    return max(1, math.ceil(cpus - 1e-9))


def meminfo(memory_mb: int) -> str:
    """``/proc/meminfo`` of a machine with ``memory_mb`` of memory, just started, no swap."""
    total = memory_mb * 1024
    # A fixed share in use, so that every run of the same sandbox shows the same numbers.
    used = min(total // 2, 16 * 1024)
    free = total - used
    rows = {
        "MemTotal": total,
        "MemFree": free,
        "MemAvailable": free,
        "Buffers": 0,
        "Cached": 0,
        "SwapCached": 0,
        "Active": used,
        "Inactive": 0,
        "Shmem": 0,
        "SReclaimable": 0,
        "SUnreclaim": 0,
        "SwapTotal": 0,
        "SwapFree": 0,
        "Dirty": 0,
        "CommitLimit": total,
        "Committed_AS": used,
    }
    return "".join(f"{name + ':':<16}{value:>8} kB\n" for name, value in rows.items())


BTIME_ROUNDING_S = 1
"""Added to the boot time the view shows: ``btime`` is rounded down (see setup_environment)."""


def setup_environment(
    memory_mb: int,
    cpus: float,
    hidden: list[str],
    clock_offset_s: int = 0,
    disk_mb: int | None = None,
    writable: tuple[str, ...] = (),
) -> dict[str, str]:
    """The environment :data:`SETUP` runs with, for a sandbox of these limits.

    ``writable`` are the image's writable folders: those that are not mounts (no disk cap)
    are bound into the view writable.

    ``clock_offset_s`` moves the boot time ``/proc/stat`` shows onto the episode's clock (and
    is the offset the clock library shifts file times by), one second later still: the
    kernel's ``btime`` is whole seconds rounded down, so ps (``btime`` plus a process's start
    ticks) would date a process up to a second before it started, and a shell started in the
    episode's first second before the clock's start (08:59:59 on a clock starting at 09:00);
    moved up, a process is dated less than a second after it started, never before.
    ``disk_mb`` is the size ``df /`` shows (the disk cap; without one, :data:`UNCAPPED_ROOT_MB`).
    """
    return {
        "VIEW_PID_FILE": PID_FILE,
        "VIEW_DISK_MB": str(disk_mb if disk_mb is not None else UNCAPPED_ROOT_MB),
        "VIEW_BOOT_SHIFT": str(clock_offset_s + BTIME_ROUNDING_S),
        "VIEW_INNER": INNER,
        "VIEW_MEMINFO": meminfo(memory_mb),
        "VIEW_TMPFS_KB": str(memory_mb * 1024 // 2),
        "VIEW_LOADAVG": "0.00 0.00 0.00 1/1 1\n",
        "VIEW_CPUS": str(cpu_count(cpus)),
        "VIEW_HIDDEN": " ".join(hidden),
        "VIEW_WRITABLE": " ".join(writable),
    }


__all__ = [
    "HIDDEN_LABEL",
    "INIT_NAME",
    "PID_FILE",
    "SETUP",
    "VERSION",
    "VIEW_LABEL",
    "cpu_count",
    "meminfo",
    "setup_environment",
]
