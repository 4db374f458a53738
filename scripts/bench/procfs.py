"""Readers for /proc (Linux only): memory, CPU time, threads and process trees.

Units: memory in KiB (as the kernel reports it), CPU time in clock ticks (utime+stime) or in
nanoseconds (schedstat, summed over threads).
"""

import os

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _read(path):
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        return f.read()


def status(pid):
    """Fields of /proc/<pid>/status as a dict of strings (e.g. 'VmRSS': '12345 kB')."""
    out = {}
    for line in _read(f"/proc/{pid}/status").splitlines():
        key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out


def kib(value):
    """'12345 kB' -> 12345."""
    return int(value.split()[0]) if value else 0


def vm_rss_kib(pid):
    """Resident set size of the whole process (all threads share it), KiB."""
    return kib(status(pid).get("VmRSS", "0 kB"))


def threads(pid):
    return int(status(pid).get("Threads", "0"))


def pss_kib(pid):
    """Proportional set size (shared pages divided among their users), KiB; 0 if unreadable."""
    try:
        for line in _read(f"/proc/{pid}/smaps_rollup").splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _stat_fields(pid):
    text = _read(f"/proc/{pid}/stat")
    # comm may contain spaces and parentheses: split after the last ')'.
    rest = text[text.rindex(")") + 2:].split()
    return rest  # rest[0] is field 3 (state)


def cpu_ticks(pid):
    """utime + stime of the process (all its threads), in clock ticks."""
    f = _stat_fields(pid)
    return int(f[11]) + int(f[12])  # fields 14 and 15


def ppid(pid):
    return int(_stat_fields(pid)[1])


def sched_ns(pid):
    """CPU time in ns summed over the process's threads (/proc/<pid>/task/*/schedstat)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            total += int(_read(f"/proc/{pid}/task/{tid}/schedstat").split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def ctx_switches(pid):
    """Voluntary + involuntary context switches summed over threads (a wakeup count)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            st = _read(f"/proc/{pid}/task/{tid}/status")
        except OSError:
            continue
        for line in st.splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                total += int(line.split(":")[1])
    return total


def children(pid):
    """Direct children of pid."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if ppid(int(name)) == pid:
                out.append(int(name))
        except (OSError, ValueError, IndexError):
            pass
    return out


def descendants(pid):
    """Every process below pid (children, grandchildren, ...)."""
    tree = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            tree.setdefault(ppid(int(name)), []).append(int(name))
        except (OSError, ValueError, IndexError):
            pass
    out, todo = [], [pid]
    while todo:
        for c in tree.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def alive(pid):
    """True when pid exists and is not a zombie."""
    try:
        return _stat_fields(pid)[0] != "Z"
    except (OSError, ValueError, IndexError):
        return False


def cmdline(pid):
    try:
        return _read(f"/proc/{pid}/cmdline").split("\0")
    except OSError:
        return []


def environ(pid):
    """The environment a process was started with, as a dict."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        raw = f.read()
    env = {}
    for item in raw.split(b"\0"):
        if b"=" in item:
            k, _, v = item.partition(b"=")
            env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env


def task_sched(pid):
    """{tid: (comm, ns on a CPU, ns waiting on a run queue)} of every thread of pid, from
    /proc/<pid>/task/<tid>/schedstat (its first two fields) and .../comm."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            comm = _read(f"/proc/{pid}/task/{tid}/comm").strip()
            run, wait = _read(f"/proc/{pid}/task/{tid}/schedstat").split()[:2]
            out[tid] = (comm, int(run), int(wait))
        except (OSError, ValueError):
            pass
    return out


def thread_group(comm):
    """The group a thread's name belongs to in a per-thread table: every `session-<peer>` is
    one group, a name ending in a number (a pool's worker) loses the number."""
    if comm.startswith("session-"):
        return "session-*"
    return comm.rstrip("0123456789").rstrip("-") or comm


def sched_delta(before, after):
    """[(group, threads, cpu ms, run-queue wait ms, the wait's largest share by one thread ms)]
    of the threads between two task_sched readings, busiest group first (a thread born in
    between counts from 0; one gone in between is not seen)."""
    groups = {}
    for tid, (comm, run, wait) in after.items():
        _, run0, wait0 = before.get(tid, (comm, 0, 0))
        g = groups.setdefault(thread_group(comm), [0, 0.0, 0.0, 0.0])
        g[0] += 1
        g[1] += (run - run0) / 1e6
        g[2] += (wait - wait0) / 1e6
        g[3] = max(g[3], (wait - wait0) / 1e6)
    rows = [(name, n, cpu, wait, most) for name, (n, cpu, wait, most) in groups.items()]
    return sorted(rows, key=lambda r: -r[2])
