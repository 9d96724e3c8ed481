"""The host's side of the benchmarks that start dsec-vmm sandboxes and wait for their guest
agent (restore-vs-qemu, isolation-cost, image-memory, pool-soak, pool): starting and
stopping a VMM's process group, waiting for the agent through build/benchmarks/sandbox_probe,
a sandbox's CPU time and memory and the host's memory read from /proc, staging files on a
local tmpfs, and medians.

A sandbox is a process group of its own (a jailed VMM run by hand is two processes: the
supervisor and the VMM in its pid namespace; a pool's jailed clone is one), so its figures
are summed over the group.
"""

import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CMDLINE = "console=ttyS0 reboot=k panic=-1 quiet dsec.agent"
DEFAULT_IMAGE = Path(os.environ.get("DSEC_IMAGE_DIR", Path.home() / ".cache/dsec-vmm/default"))
TESTBED_HINT = "run this inside the test bed (tools/kvm-harness --rw build -- ...)"


def setup_problem(vmm, probe, image=DEFAULT_IMAGE):
    """What keeps a benchmark from starting dsec-vmm sandboxes here, or None."""
    for f in (vmm, probe, image / "kernel", image / "initrd"):
        if not f.exists():
            return f"{f} is missing: run tools/build and images/build-image"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return f"no usable /dev/kvm: {TESTBED_HINT}"
    if Path("/sys/module/kvm_pvm").is_dir():
        return f"/dev/kvm here is PVM (kvm_pvm), which boots no ordinary guest kernel: {TESTBED_HINT}"
    return None


def local_work_dir(prefix):
    """A fresh directory on a local tmpfs (/run): the test bed's /tmp is 9p, where Unix
    sockets cannot be bound and files are not in the VM's own page cache."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/run" if os.access("/run", os.W_OK) else None))


def stage(work, files):
    """Copies {name: source} into `work` (resolving links); returns {name: copy}."""
    staged = {}
    for name, src in files.items():
        staged[name] = work / name
        shutil.copy(Path(src).resolve(), staged[name])
    return staged


def start(argv, log_path):
    """Starts a VMM in a process group of its own, its output to `log_path`; returns the
    process and the monotonic time just before it started, in ns."""
    with open(log_path, "w") as logf:
        t0 = time.monotonic_ns()
        vm = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, start_new_session=True)
    return vm, t0


def stop(vm, sig=signal.SIGTERM):
    """Signals the VMM's whole process group and reaps the process that was started."""
    try:
        os.killpg(vm.pid, sig)
    except ProcessLookupError:
        pass
    vm.wait()


def wait_ready(probe, since_ns, uds=None, cid=None, wait_s=120):
    """Waits for the guest agent's first answer (the probe tries every 10 ms); returns the
    milliseconds from `since_ns` to it. Reaches the agent through a dsec-vmm vsock socket
    (`uds`) or over AF_VSOCK (`cid`)."""
    argv = [str(probe), "--ready-only", "1", "--since-monotonic-ns", str(since_ns), "--wait", str(wait_s)]
    argv += ["--uds", str(uds)] if uds else ["--cid", str(cid)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=wait_s + 60)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return json.loads(out.stdout)["ready_ms"]


def procs_with_stat_field(index, value):
    """The processes whose /proc/PID/stat field `index` (counted after the name: 0 state,
    1 ppid, 2 pgrp, ...) is `value`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[index]) == value:
                pids.append(int(entry.name))
    return pids


def group_pids(pgid):
    """The processes of process group `pgid`."""
    return procs_with_stat_field(2, pgid)


def cpu_seconds(pid):
    """user + system CPU time of a process (and its waited-for children), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
    return ticks / os.sysconf("SC_CLK_TCK")


def memory_kib(pid):
    """A whole process's memory in KiB, from /proc/PID/smaps_rollup: rss (resident), pss
    (shared pages divided among the processes that map them) and uss (Private_Clean +
    Private_Dirty: what ending it would give back)."""
    mem = {"rss": 0, "pss": 0, "uss": 0}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key == "Rss":
            mem["rss"] = int(rest.split()[0])
        elif key == "Pss":
            mem["pss"] = int(rest.split()[0])
        elif key in ("Private_Clean", "Private_Dirty"):
            mem["uss"] += int(rest.split()[0])
    return mem


def meminfo_kib():
    """/proc/meminfo's fields, in KiB."""
    fields = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            fields[key] = int(rest.split()[0])
    return fields


def settled_meminfo_kib(step_s=0.5, within_kib=256, timeout_s=30):
    """meminfo_kib() once the host's memory in use (MemTotal - MemAvailable) holds still:
    unmapped page cache dropped first where we may (root), then read every `step_s` until
    two reads in a row differ by less than `within_kib`. The kernel frees some things late
    (a network namespace's memory goes in a workqueue after its last process), which a
    single read would count for the sandboxes measured after it."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        pass
    used = lambda m: m["MemTotal"] - m["MemAvailable"]
    last = meminfo_kib()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(step_s)
        now = meminfo_kib()
        if abs(used(now) - used(last)) < within_kib:
            return now
        last = now
    return last


def group_cpu_seconds(pgid):
    return sum(cpu_seconds(pid) for pid in group_pids(pgid))


def group_memory_kib(pgid):
    """memory_kib summed over a process group."""
    total = {"rss": 0, "pss": 0, "uss": 0}
    for pid in group_pids(pgid):
        for key, value in memory_kib(pid).items():
            total[key] += value
    return total


def median(values):
    return statistics.median(values) if values else float("nan")


def spread(values):
    """'median (min-max)' of a list of numbers, one decimal."""
    if not values:
        return "n/a"
    return f"{median(values):.1f} ({min(values):.1f}-{max(values):.1f})"
