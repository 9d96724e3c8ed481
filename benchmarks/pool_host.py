"""The host's side of the benchmarks that drive a `dsec-vmm pool` daemon (pool-soak, pool):
the daemon started on a state directory and socket of its own, a client of its HTTP/JSON
API over that Unix socket, acquire/exec/release cycles that tell a sandbox lost to its
guest's crash from a failure, the peer's `dsec-vmm restore` by hand, and the daemon's own
figures (open fds, child processes, threads, RSS, CPU time) read from /proc.
"""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import sandbox_host as host

# A restore in the emulated test bed takes seconds, and requests wait on it; an exec ends in
# the guest within 60 s (its default timeout_ms).
POOL_DEADLINE_S = 120


class UnixHttp(http.client.HTTPConnection):
    """HTTP/1.1 over a Unix socket, one connection kept alive for the whole run: the
    daemon's fd count then holds it at both samples."""

    def __init__(self, path):
        super().__init__("pool", timeout=POOL_DEADLINE_S)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(self.timeout)
        self.sock.connect(str(self.path))


class Pool:
    """A `dsec-vmm pool` process and a client of its API."""

    def __init__(self, vmm, work, extra_args=()):
        self.socket, self.state_dir, self.log_path = work / "pool.sock", work / "state", work / "pool.log"
        self.image_dir = work / "images"
        with open(self.log_path, "w") as logf:
            self.proc = subprocess.Popen([str(vmm), "pool", "--state-dir", str(self.state_dir), "--image-dir",
                                          str(self.image_dir), "--socket", str(self.socket),
                                          "--ready-timeout", str(POOL_DEADLINE_S - 20), *extra_args],
                                         stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
        deadline = time.monotonic() + 60
        while not self.socket.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError(f"the daemon did not come up: {self.log_tail()}")
            time.sleep(0.05)
        self.http = UnixHttp(self.socket)

    def request(self, method, path, body=None):
        """(status, parsed body or None)"""
        self.http.request(method, path, body=json.dumps(body) if body is not None else None,
                          headers={"Content-Type": "application/json"} if body is not None else {})
        reply = self.http.getresponse()
        data = reply.read()
        return reply.status, (json.loads(data) if data else None)

    def register(self, name, snap, limits):
        """Puts the warm image `snap` into the daemon's image store as `name` (hard links of its
        files: the store takes images by name and follows no link) and registers it."""
        image = self.image_dir / name
        image.mkdir(mode=0o700, exist_ok=True)
        for f in ("state", "memory"):
            if not (image / f).exists():
                os.link(snap / f, image / f)
        return self.expect(200, "PUT", f"/images/{name}", limits)

    def expect(self, status, method, path, body=None):
        got, answer = self.request(method, path, body)
        if got != status:
            raise RuntimeError(f"{method} {path}: {got} {answer}, expected {status}")
        return answer

    def counts(self, image):
        images = self.expect(200, "GET", "/images")["images"]
        return next(i["sandboxes"] for i in images if i["name"] == image)

    def wait_for(self, what, done, within_s=POOL_DEADLINE_S):
        deadline = time.monotonic() + within_s
        while not done():
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {what} within {within_s} s: {self.log_tail()}")
            time.sleep(0.01)

    def at_rest(self):
        """Waits until every image has its `ready` clones ready and none starting, in use
        or stopping, and the daemon has exactly those VMMs as children."""
        def rest():
            images = self.expect(200, "GET", "/images")["images"]
            settled = all(i["sandboxes"] == {"starting": 0, "ready": i["ready"], "in_use": 0, "stopping": 0}
                          for i in images)
            return settled and len(children(self.proc.pid)) == sum(i["ready"] for i in images)
        self.wait_for("pool at rest", rest)

    def log_tail(self):
        return tail(self.log_path)

    def sandbox_logs(self):
        """Each live VMM's device state (SIGUSR1 writes it to its log), then the end of every
        sandbox's log: its VMM's messages and its guest's console, for a failure's reader."""
        for vmm in children(self.proc.pid):
            try:
                os.kill(vmm, signal.SIGUSR1)
            except ProcessLookupError:
                pass
        time.sleep(2)
        return "".join(f"--- {log.name}\n{tail(log, 60)}"
                       for log in sorted((self.state_dir / "sandboxes").glob("*.log")))

    def stop(self):
        self.http.close()
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            # Its VMMs are process groups of their own: they outlive a killed daemon.
            for vmm in children(self.proc.pid):
                try:
                    os.killpg(vmm, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.kill()
            return self.proc.wait()


def tail(path, lines=30):
    try:
        return "".join(path.read_text(errors="replace").splitlines(True)[-lines:])
    except OSError as e:
        return f"({e})"


def launchers(pid):
    """The daemon's launcher: its one child that is a fork of it (dsec-vmm-pool), which starts
    and reaps its VMMs (vmm/pool/launcher_process.h)."""
    found = []
    for child in host.procs_with_stat_field(1, pid):
        try:
            if Path(f"/proc/{child}/comm").read_text().strip() == "dsec-vmm-pool":
                found.append(child)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return found


def children(pid):
    """The daemon's VMMs, zombies included (an unreaped VMM is a leak): its launcher's
    children, and any other child of the daemon's own."""
    own = launchers(pid)
    vmms = [child for child in host.procs_with_stat_field(1, pid) if child not in own]
    for launcher in own:
        vmms += host.procs_with_stat_field(1, launcher)
    return vmms


def reaped_cpu_seconds(pid):
    """The daemon's CPU time and its launcher's, each with its reaped children's (the
    launcher's: every ended VMM's)."""
    return host.cpu_seconds(pid) + sum(host.cpu_seconds(launcher) for launcher in launchers(pid))


def pool_cpu_seconds(pid):
    """CPU time (user + system) of the daemon `pid` and its VMMs, in seconds: its own and
    its launcher's, its ended VMMs' (reaped by the launcher, they count in its cutime and
    cstime) and each live VMM's. Read again when a VMM was reaped meanwhile, which would
    count it twice or not at all."""
    while True:
        own = reaped_cpu_seconds(pid)
        live = 0.0
        for vmm in children(pid):
            try:
                live += host.cpu_seconds(vmm)
            except (FileNotFoundError, ProcessLookupError):
                pass  # ended since: the launcher's cutime changes when it reaps it
        if reaped_cpu_seconds(pid) == own:
            return own + live


def daemon_figures(pid):
    status = Path(f"/proc/{pid}/status").read_text()
    rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return {"fds": len(os.listdir(f"/proc/{pid}/fd")), "children": len(children(pid)),
            "threads": len(os.listdir(f"/proc/{pid}/task")), "rss_kib": rss}


def percentiles(values):
    """p50, p90, p99 by the nearest rank."""
    if not values:
        return [float("nan")] * 3
    s = sorted(values)
    return [s[min(len(s) - 1, max(0, -(-len(s) * p // 100) - 1))] for p in (50, 90, 99)]


def run_staged(build_dir, name, run):
    """What both pool benchmarks start with: checks that dsec-vmm sandboxes can run here
    (else exit 2), stages dsec-vmm (and dsec-vmm-pool) and the default image's kernel and
    initramfs in a fresh directory on a local tmpfs, and exits with run(work, probe, staged)'s status once the
    directory is removed. On a tmpfs because Unix sockets cannot be bound on the test bed's
    9p /tmp, and because the snapshot's memory file is then in the page cache, as on a
    pool's host."""
    vmm, probe, image = build_dir / "vmm/dsec-vmm", build_dir / "benchmarks/sandbox_probe", host.DEFAULT_IMAGE
    problem = host.setup_problem(vmm, probe, image)
    if problem:
        print(f"{name}: {problem}", file=sys.stderr)
        sys.exit(2)
    work = host.local_work_dir(name + "-")
    try:
        # dsec-vmm-pool beside dsec-vmm: `dsec-vmm pool` executes it from its own directory.
        staged = host.stage(work, {"dsec-vmm": vmm, "dsec-vmm-pool": vmm.parent / "dsec-vmm-pool",
                                   "kernel": image / "kernel", "initrd": image / "initrd"})
        code = run(work, probe, staged)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(code)


def warm(staged, work, vcpus, memory):
    """A warm image of the default image in WORK/warm, made with the staged dsec-vmm."""
    snap = work / "warm"
    res = subprocess.run([str(staged["dsec-vmm"]), "warm", "--out", str(snap), "--kernel", str(staged["kernel"]),
                          "--initrd", str(staged["initrd"]), "--cmdline", host.CMDLINE, "--console", "/dev/null",
                          "--vcpus", str(vcpus), "--memory", str(memory)],
                         capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise RuntimeError(f"dsec-vmm warm failed: {res.stderr[-2000:]}")
    return snap


# How the daemon logs a sandbox lost after it served (vmm/pool/sandbox_lifecycle.cpp), with its VMM's
# last log lines up to the daemon's next line.
LOST_REPORT = re.compile(r"pool: (sb-[0-9a-f-]+) lost: its VMM ([^;\n]+); its log ended:\n(.*?)"
                         r"(?=^\[[^]\n]+\] \[\w+\] pool: |\Z)", re.S | re.M)
# dsec-vmm's exit status when its guest crashed (a kernel panic, a triple fault). A restore
# bug that crashes guests ends the same way, so a crash alone is not the guest's doing: ...
GUEST_CRASHED = "exited with status 2"
# ... only the emulated test bed's known fault is: a vCPU that triple-faulted and was found
# in the reset state (dsec-vmm's line, vmm/kvm/cpu_state_text.cpp; docs/kvm-test-bed-faults.md),
# under tools/kvm-harness's emulated test bed (DSEC_TESTBED=emulated in its commands'
# environment). The same pattern as the harness's NESTED_TRIPLE_FAULT_RE.
TESTBED_TRIPLE_FAULT = re.compile(r"triple-faulted at RIP=0xfff0 .*CS=0xf000:0xffff0000:.*"
                                  r"the state of a vCPU just reset")
# A sandbox the daemon's health checks found silent ...
STOPPED_ANSWERING = "stopped answering"
# ... whose VMM still parked its vCPUs and logged their state on the daemon's SIGUSR1
# (vmm/machine/machine.cpp): the VMM was alive, its guest had stalled.
VMM_ANSWERED_SIGUSR1 = "interrupt state (the vCPUs parked to read it)"
# How long the daemon takes at most to find a silent sandbox lost, at its default health
# options (10 s between checks, 15 s for an answer, 2 failures), and kill it.
HUNG_DETECTION_S = 2 * (10 + 15) + 5


def guest_side(how, log_tail):
    """Whether a loss, as the daemon reports it, was the guest's doing: a crash with the
    emulated test bed's signature, or a stall under a VMM that still answered. Any other
    crash is a failure."""
    if how == GUEST_CRASHED:
        if os.environ.get("DSEC_TESTBED") == "emulated" and TESTBED_TRIPLE_FAULT.search(log_tail):
            return "a guest crash (the test bed's nested triple fault)"
        return None
    if how.startswith(STOPPED_ANSWERING) and VMM_ANSWERED_SIGUSR1 in log_tail:
        return "a guest stall"
    return None


class GuestLost(Exception):
    """A cycle's sandbox was lost to its guest (a crash, or a stall); the pool reported it."""


def lost_reason(pool, sandbox_id, within_s=5):
    """Why the pool says `sandbox_id` is gone, when it was lost to its guest; else None.
    A request can fail a moment (or, for a stalled guest, the health checks' time) before
    the pool finds the VMM whose end broke it: asks again until the sandbox is gone or
    `within_s` passed."""
    deadline = time.monotonic() + within_s
    while True:
        status, answer = pool.request("GET", f"/sandboxes/{sandbox_id}")
        why = (answer or {}).get("fault_message", "")
        if status == 410:
            how, _, log_tail = why.partition("was lost: its VMM ")[2].partition("; its log ended:")
            return why if guest_side(how, log_tail) else None
        if status != 200 or time.monotonic() > deadline:
            return None
        time.sleep(0.1)


def losses(log_path):
    """The sandboxes the daemon's log reports lost: ({id: what} for losses that were the
    guest's doing, {id: how its VMM ended} for every other)."""
    guest, other = {}, {}
    for sandbox_id, how, log_tail in LOST_REPORT.findall(Path(log_path).read_text(errors="replace")):
        what = guest_side(how, log_tail)
        if what:
            guest[sandbox_id] = f"{what}: its VMM {how}"
        else:
            other[sandbox_id] = how
    return guest, other


# How the daemon logs a clone that never served (vmm/pool/sandbox_lifecycle.cpp): its VMM ended first,
# or its ready timeout passed.
START_FAILED_LINE = re.compile(r"pool: (sb-[0-9a-f-]+) (failed to start: its VMM [^;\n]+|did not serve within \d+ ms)")


def start_failures(log_path):
    """The clones the daemon's log reports never serving (its refill errors): {id: why}."""
    return dict(START_FAILED_LINE.findall(Path(log_path).read_text(errors="replace")))


def metric(pool, name):
    """A counter of GET /metrics, summed over its labels."""
    pool.http.request("GET", "/metrics")
    reply = pool.http.getresponse()
    text = reply.read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith(name) and line[len(name):len(name) + 1] in (" ", "{"))


def agent_stalled(pool, sandbox_id, vmm_log_path, wait_s=5):
    """Why a sandbox whose agent did not answer, and that the pool still holds (its health
    checks see only the guest kernel accept a connection), counts as a guest stall: its VMM
    still parks its vCPUs and logs their state on SIGUSR1 (its threads run; the guest went
    silent, the test bed's known stall, docs/kvm-test-bed-faults.md). The sandbox is then
    released. None when its VMM did not answer either, or the pool no longer holds it."""
    status, sandbox = pool.request("GET", f"/sandboxes/{sandbox_id}")
    if status != 200 or not sandbox.get("pid"):
        return None
    before = tail(vmm_log_path, 10**6).count(VMM_ANSWERED_SIGUSR1)
    try:
        os.kill(sandbox["pid"], signal.SIGUSR1)  # the VMM itself (no supervisor in the pool)
    except OSError:
        return None
    deadline = time.monotonic() + wait_s
    while tail(vmm_log_path, 10**6).count(VMM_ANSWERED_SIGUSR1) <= before:
        if time.monotonic() > deadline:
            return None
        time.sleep(0.1)
    pool.request("DELETE", f"/sandboxes/{sandbox_id}")
    return "a guest stall: its agent did not answer, its VMM answered SIGUSR1; released"


def run_checked(pool, sandbox_id, argv, stdout, what):
    """Runs `argv` in an acquired sandbox through the pool; checks that it exited 0 and
    printed `stdout`. Returns its ms; raises GuestLost when its guest crashed or stalled."""
    t0 = time.monotonic_ns()
    status, out = pool.request("POST", f"/sandboxes/{sandbox_id}/exec", {"argv": argv})
    ms = (time.monotonic_ns() - t0) / 1e6
    if status != 200 or out["exit"] != {"kind": "exited", "code": 0} or out["stdout"] != stdout:
        # Its log goes with the sandbox's other files: read it before the pool removes them.
        vmm_log = tail(pool.state_dir / "sandboxes" / (sandbox_id + ".log"))
        # An agent that did not answer may be a stalled guest: the health checks decide.
        agent_silent = status in (502, 504)
        why = lost_reason(pool, sandbox_id, HUNG_DETECTION_S if agent_silent else 5)
        if not why and agent_silent:
            why = agent_stalled(pool, sandbox_id, pool.state_dir / "sandboxes" / (sandbox_id + ".log"))
        if why:
            raise GuestLost(f"{what}: {sandbox_id} {why.splitlines()[0]}")
        raise RuntimeError(f"{what}: `{' '.join(argv)}` in {sandbox_id} gave {status} {out}; its VMM's log "
                           f"ends:\n{vmm_log}")
    return ms


def release(pool, sandbox_id, what):
    """DELETE /sandboxes/ID; raises GuestLost when the guest had crashed before."""
    status, out = pool.request("DELETE", f"/sandboxes/{sandbox_id}")
    if status != 204:
        why = lost_reason(pool, sandbox_id)
        if why:
            raise GuestLost(f"{what}: {sandbox_id} {why.splitlines()[0]}")
        raise RuntimeError(f"DELETE /sandboxes/{sandbox_id}: {status} {out}, expected 204")


def cycle(pool, image, i):
    """One acquire, `echo i` and release; (acquire ms, exec ms)."""
    t0 = time.monotonic_ns()
    sandbox = pool.expect(201, "POST", "/sandboxes", {"image": image})
    acquire_ms = (time.monotonic_ns() - t0) / 1e6
    exec_ms = run_checked(pool, sandbox["id"], ["echo", str(i)], f"{i}\n", f"cycle {i}")
    release(pool, sandbox["id"], f"cycle {i}")
    return acquire_ms, exec_ms


def hand_restore(vmm, snap, probe, work, n):
    """The peer: `dsec-vmm restore` started by hand, a fresh process, until its agent's first
    answer. Returns {"ms": from its start, "cpu_s": its process group's CPU time by then}."""
    vm, t0 = host.start([str(vmm), "restore", str(snap), "--vsock", str(work / f"hand-{n}.vsock")],
                        work / f"hand-{n}.log")
    try:
        ms = host.wait_ready(probe, t0, uds=work / f"hand-{n}.vsock", wait_s=POOL_DEADLINE_S)
        return {"ms": ms, "cpu_s": host.group_cpu_seconds(vm.pid)}
    finally:
        host.stop(vm)


def empty_pool_acquires(pool, snap, n, log):
    """`n` acquire/exec/release cycles of an image "empty" on `snap` that keeps no ready
    clone, so that each acquire restores one on the spot. Returns each measured cycle's
    (monotonic time of its start, acquire ms); a sandbox lost to its guest's crash is
    logged and not measured."""
    pool.register("empty", snap, {"ready": 0, "max": 1})
    measured = []
    for i in range(n):
        start = time.monotonic()
        try:
            measured.append((start, cycle(pool, "empty", i)[0]))
        except GuestLost as e:
            log(f"{e}: the pool reported it lost; not measured")
        pool.at_rest()  # the released clone ended: the next acquire restores one
    return measured
