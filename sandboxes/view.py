"""The agent's view of a sandbox: an ordinary machine of the sandbox's size, without our harness.

An image that carries the label ``worldtrace.view=private`` gets, when its sandbox starts, a
set of namespaces the agent's processes live in (the drivers start every agent process there,
with ``nsenter``), made by :data:`SETUP` as root inside the container:

- its own PID namespace with a fresh ``/proc``: ``ps`` and ``top`` show the agent's processes
  only, under a PID 1 named ``/sbin/init`` (a shell that reaps orphans and does nothing else);
  docker-init, the keep-alive ``sleep``, the driver and the tmux clients that carry the
  agent's keystrokes stay outside, and process and job numbers follow the agent's actions
  alone;
- its own mount namespace: docker-init's bind mount is gone, the loop devices do not name the
  disk image behind them, the paths the image lists in ``worldtrace.hidden`` (the driver's
  folder) are not there, and ``/proc/meminfo``, ``/proc/cpuinfo``, ``/proc/uptime`` and
  ``/proc/loadavg`` describe a machine of the sandbox's limits (``free``, ``top``,
  ``uptime``), fixed at its start so that identical runs see identical numbers;
- its own cgroup namespace: ``/proc/self/cgroup`` shows ``/``, not the container id.

``nproc`` follows the container's CPU set, which :class:`~worldtrace.sandboxes.docker.
DockerSandbox` sets to as many cores as the CPU limit (rounded up). Making the namespaces
needs CAP_SYS_ADMIN, which the container gets for its root processes only: the agent runs as
an unprivileged user with ``no-new-privileges``, so it can never use it.
"""

from __future__ import annotations

import math

VIEW_LABEL = "worldtrace.view"
"""Image label: ``private`` gives the sandbox's agent the private view this module makes."""
HIDDEN_LABEL = "worldtrace.hidden"
"""Image label: space-separated paths the agent's view does not show (the driver's folder)."""
INIT_NAME = "init"
"""The command name of the view's PID 1 (its command line is ``/sbin/init``)."""
UPTIME_S = 1.0
"""What ``/proc/uptime`` says in the view: the machine has just started."""

# Runs as PID 1 of the new namespaces, as root, then becomes the view's init. Its inputs come
# from the environment (VIEW_*), which the init drops. Every file it mounts is written to the
# view's own /dev/shm and unlinked once bound: nothing of it stays listable.
INNER = r"""
set -e
# -n everywhere: the root filesystem is read-only, there is no mount table to write.
mount -n -t proc -o nosuid,nodev,noexec proc /proc
umount /usr/sbin/docker-init 2>/dev/null || true
mount -n -t tmpfs -o nosuid,nodev,mode=1777,size=65536k shm /dev/shm
# Every file and folder of ours lives on the view's /dev/shm and is unlinked once bound: df
# shows that filesystem once, as any machine's /dev/shm, and ls finds nothing of it.
mkdir -p /dev/shm/.proc /dev/shm/.etc /dev/shm/.hide
put() {  # put NAME CONTENT TARGET: a file of ours over TARGET
  printf '%s' "$2" > "/dev/shm/.proc/$1"
  mount -n --bind "/dev/shm/.proc/$1" "$3"
}
put meminfo "$VIEW_MEMINFO" /proc/meminfo
put uptime "$VIEW_UPTIME" /proc/uptime
put loadavg "$VIEW_LOADAVG" /proc/loadavg
put cpuinfo "$(awk -v n="$VIEW_CPUS" 'BEGIN { RS = ""; ORS = "\n\n" } NR <= n' /proc/cpuinfo)
" /proc/cpuinfo
# The boot time on the episode's clock (sandboxes/clock.py): ps dates a process's START from it.
put stat "$(awk -v shift="$VIEW_BOOT_SHIFT" '$1 == "btime" { $2 += shift } { print }' /proc/stat)
" /proc/stat
# Files Docker (and the clock) bind from the host's disk would name that disk (mount, df):
# the view binds copies of them from a tmpfs instead.
awk '{ for (i = 7; $i != "-"; i++) ; if ($(i + 2) ~ /^\/dev\/([sv]d|nvme|xvd)/) print $5 }' \
  /proc/self/mountinfo | while read -r target; do
  if [ -f "$target" ]; then
    copy="/dev/shm/.etc/$(printf '%s' "$target" | tr / _)"
    cp -p "$target" "$copy"
    # (A program started while the preloaded clock library is swapped warns about it.)
    umount -n -l "$target" 2>/dev/null
    mount -n --bind "$copy" "$target" 2>/dev/null
    mount -n -o remount,ro,bind "$target" 2>/dev/null
  fi
done
rm -rf /dev/shm/.proc /dev/shm/.etc
# The sandbox's loop disk would name the image file behind it (mount(8) shows the backing file).
awk '{ for (i = 7; $i != "-"; i++) ; if ($(i + 2) ~ /^\/dev\/loop/) print $3 }' \
  /proc/self/mountinfo | sort -u | while read -r device; do
  file="/sys/dev/block/$device/loop/backing_file"
  if [ -f "$file" ]; then mount -n --bind /dev/null "$file"; fi
done
# Hide a path: its folder becomes a tmpfs that holds everything else of it, bound back in.
hide() {
  parent=$(dirname "$1"); name=$(basename "$1")
  [ -e "$1" ] || return 0
  folder="/dev/shm/.hide/$(printf '%s' "$parent" | tr / _)"
  mkdir -m 755 "$folder"
  mount -n --bind "$folder" /mnt
  for entry in "$parent"/* "$parent"/.[!.]*; do
    [ -e "$entry" ] || [ -L "$entry" ] || continue
    base=$(basename "$entry")
    [ "$base" = "$name" ] && continue
    if [ -L "$entry" ]; then cp -P "$entry" "/mnt/$base"
    elif [ -d "$entry" ]; then mkdir "/mnt/$base"; mount -n --rbind "$entry" "/mnt/$base"
    else touch "/mnt/$base"; mount -n --bind "$entry" "/mnt/$base"
    fi
  done
  mount -n --move /mnt "$parent"
  mount -n -o remount,ro,bind "$parent" 2>/dev/null || mount -n -o remount,ro "$parent"
}
for path in $VIEW_HIDDEN; do hide "$path"; done
# What was bound back in stays a mount point under its folder there: that much remains.
rm -rf /dev/shm/.hide 2>/dev/null || true
# The init: a shell named init (so its command name is "init") that reads its commands from
# a FIFO nobody writes: it waits forever and reaps the orphans it inherits.
ln -s /bin/bash /dev/shm/init
mkfifo -m 600 /dev/shm/.fifo
printf 'rm -f /dev/shm/init /dev/shm/.boot\nexec 0<>/dev/shm/.fifo\nrm -f /dev/shm/.fifo\n' \
  > /dev/shm/.boot
cd /
echo ready >&3
exec 3>&-
exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  bash -c 'exec -a /sbin/init /dev/shm/init < /dev/shm/.boot'
"""

# Runs as root through one exec: starts the namespaces in the background and returns once the
# view's init is about to start (the inner script says so on descriptor 3), or says why not.
SETUP = r"""
log=$(mktemp)
ready=$(mktemp -u)
mkfifo -m 600 "$ready"
setsid unshare --pid --fork --mount --cgroup --propagation private bash -c "$VIEW_INNER" \
  3>"$ready" </dev/null >/dev/null 2>"$log" &
read -r answer < "$ready"
rm -f "$ready"
if [ "$answer" = ready ]; then rm -f "$log"; exit 0; fi
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


def setup_environment(
    memory_mb: int, cpus: float, hidden: list[str], clock_offset_s: int = 0
) -> dict[str, str]:
    """The environment :data:`SETUP` runs with, for a sandbox of these limits.

    ``clock_offset_s`` moves the boot time ``/proc/stat`` shows onto the episode's clock.
    """
    return {
        "VIEW_BOOT_SHIFT": str(clock_offset_s),
        "VIEW_INNER": INNER,
        "VIEW_MEMINFO": meminfo(memory_mb),
        "VIEW_UPTIME": f"{UPTIME_S:.2f} {UPTIME_S * cpu_count(cpus):.2f}\n",
        "VIEW_LOADAVG": "0.00 0.00 0.00 1/1 1\n",
        "VIEW_CPUS": str(cpu_count(cpus)),
        "VIEW_HIDDEN": " ".join(hidden),
    }


__all__ = [
    "HIDDEN_LABEL",
    "INIT_NAME",
    "SETUP",
    "VIEW_LABEL",
    "cpu_count",
    "meminfo",
    "setup_environment",
]
