"""What a box gives a server when it boots, and the counts a sizing rule gives for it.

The one source of the code a written, sized config file runs at boot: `boot_source()` is this
module's text, copied into the file (gunicorn.conf.py, a uWSGI launcher), which must boot with
the server's own packages alone. So it imports the standard library only, keeps to Python 3.8
syntax, and runs nothing when imported.

CPUs: the affinity mask (what the scheduler lets this process use: a cpuset or `taskset`),
lowered by a CFS quota (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`)
found in this process's own cgroup or any ancestor the mount shows, since the kernel throttles
at every level. Never `os.cpu_count()`: inside a container it is the host's cores.

Memory: cgroup v2 `memory.max`, v1 `memory.limit_in_bytes` (and v1's
`hierarchical_memory_limit`, which includes ancestors the mount hides), the lowest up the tree.

A process finds its own cgroup in /proc/self/cgroup (`0::PATH` for v2, `ID:CONTROLLERS:PATH`
per v1 hierarchy) and where that hierarchy is mounted in /proc/self/mountinfo, whose fourth
field is the mount's root inside the hierarchy: a container with its own cgroup namespace sees
PATH `/` and a mount rooted at `/`; an older one without a namespace sees the host's PATH
(`/docker/ID`) and a mount rooted there. The folder is the mount point plus PATH below the
root; a PATH outside the root (`/../..`: moved out of the namespace) leaves the mount point.
"""

import math
import os

PROC_CGROUP = "/proc/self/cgroup"
PROC_MOUNTINFO = "/proc/self/mountinfo"
# cgroup v1 writes "no limit" as the largest page-aligned 64-bit number; anything this big is one.
NO_LIMIT_BYTES = 1 << 60


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _unescape(text):
    """mountinfo writes space, tab, newline and backslash as octal escapes (\\040)."""
    for code in ("\\040", "\\011", "\\012", "\\134"):
        text = text.replace(code, chr(int(code[1:], 8)))
    return text


def _mounts(mountinfo_text):
    """(version, controllers, root, mount point) of each cgroup mount; v2's controllers empty."""
    found = []
    for line in mountinfo_text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, after = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(after) < 3:
            continue
        if after[0] == "cgroup2":
            found.append((2, (), _unescape(fields[3]), _unescape(fields[4])))
        elif after[0] == "cgroup":
            found.append(
                (1, tuple(after[2].split(",")), _unescape(fields[3]), _unescape(fields[4]))
            )
    return found


def _memberships(cgroup_text):
    """{controller: path} of this process's v1 hierarchies, with "" for its v2 one."""
    found: dict[str, str] = {}  # a local annotation: never evaluated, 3.8 runs it
    for line in cgroup_text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for name in controllers.split(",") if controllers else [""]:
            found.setdefault(name, path)
    return found


def cgroup_folders(controller, proc_cgroup=PROC_CGROUP, mountinfo=PROC_MOUNTINFO):
    """(version, folders) of this process's cgroup for `controller` ("cpu", "memory"): its
    own folder first, then each parent up to the mount point. The v1 hierarchy holding the
    controller where there is one, else the v2 one; (0, []) where neither is mounted."""
    mounts = _mounts(_read(mountinfo) or "")
    member = _memberships(_read(proc_cgroup) or "")
    chosen = None
    for version, controllers, root, point in mounts:
        if version == 1 and controller in controllers and controller in member:
            chosen = (1, root, point, member[controller])
            break
    if chosen is None:
        for version, _, root, point in mounts:
            if version == 2 and "" in member:
                chosen = (2, root, point, member[""])
                break
    if chosen is None:
        return 0, []
    version, root, point, path = chosen
    root = root.rstrip("/")
    # Outside the mount's view (moved out of the namespace): the mount is all there is to see.
    inside = path == root or path.startswith(root + "/")
    below = path[len(root) :].strip("/") if inside else ""
    parts = [] if ".." in below.split("/") else [p for p in below.split("/") if p]
    folders = []
    while True:
        folders.append(os.path.join(point, *parts))
        if not parts:
            return version, folders
        parts = parts[:-1]


def _lowest(found):
    """The lowest (value, source) of `found`, or (None, "") when there is none."""
    found = [item for item in found if item[0] is not None]
    return min(found, key=lambda item: item[0]) if found else (None, "")


def cpu_quota(version, folders):
    """(CPUs the CFS quota allows, the file that says so), or (None, "") without a quota."""
    found = []
    for folder in folders:
        if version == 2:
            text = (_read(os.path.join(folder, "cpu.max")) or "").split()
            if len(text) == 2 and text[0] != "max" and text[0].isdigit() and text[1].isdigit():
                found.append((int(text[0]) / int(text[1]), os.path.join(folder, "cpu.max")))
        elif version == 1:
            quota = _read(os.path.join(folder, "cpu.cfs_quota_us"))
            period = _read(os.path.join(folder, "cpu.cfs_period_us"))
            if quota and period and quota.isdigit() and period.isdigit() and int(period):
                found.append((int(quota) / int(period), os.path.join(folder, "cpu.cfs_quota_us")))
    return _lowest(found)


def memory_limit(version, folders):
    """(bytes the memory limit allows, the file that says so), or (None, "") without one."""
    found = []
    for index, folder in enumerate(folders):
        name = "memory.max" if version == 2 else "memory.limit_in_bytes"
        text = _read(os.path.join(folder, name)) if version else None
        if text and text.isdigit() and int(text) < NO_LIMIT_BYTES:
            found.append((int(text), os.path.join(folder, name)))
        if version == 1 and index == 0:  # the lowest of every ancestor, hidden ones too
            for line in (_read(os.path.join(folder, "memory.stat")) or "").splitlines():
                key, _, value = line.partition(" ")
                limited = value.isdigit() and int(value) < NO_LIMIT_BYTES
                if key == "hierarchical_memory_limit" and limited:
                    found.append((int(value), os.path.join(folder, "memory.stat")))
    return _lowest(found)


def affinity_cpus():
    """CPUs this process may run on (its affinity mask; a cpuset shows here)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def read_box(proc_cgroup=PROC_CGROUP, mountinfo=PROC_MOUNTINFO, affinity=None):
    """What this process may use: {"cpus", "cpus_from", "memory", "memory_from"}; memory None
    when no limit is set."""
    cores = affinity_cpus() if affinity is None else affinity
    version, folders = cgroup_folders("cpu", proc_cgroup, mountinfo)
    quota, quota_from = cpu_quota(version, folders)
    if quota is not None and quota <= cores:
        cpus, cpus_from = quota, f"cgroup v{version} {quota_from}"
    else:
        cpus, cpus_from = float(cores), "the affinity mask"
    version, folders = cgroup_folders("memory", proc_cgroup, mountinfo)
    memory, memory_from = memory_limit(version, folders)
    if memory is not None:
        memory_from = f"cgroup v{version} {memory_from}"
    return {"cpus": cpus, "cpus_from": cpus_from, "memory": memory, "memory_from": memory_from}


def count_at(line, cpus):
    """max(1, per_cpu x cpus + base), rounded half up."""
    per_cpu, base = line
    return max(1, int(math.floor(per_cpu * cpus + base + 0.5)))


def _plural(count, word):
    return "{} {}{}".format(
        count, word, "" if count == 1 else ("es" if word.endswith("s") else "s")
    )


def _mb(count):
    return f"{count / 2**20:,.0f}M"


def size(rule, box, environ):
    """The counts `rule` gives on `box`: {"processes", "threads", "line"}.

    `rule`: {"processes": [per_cpu, base], "threads": [per_cpu, base], "master_mb",
    "process_mb", "margin", "env", "measured_cpus": [low, high]}. The process count is capped so
    that the master plus the processes (their PSS as measured) fit under `margin` of the memory
    limit; the environment variable `rule["env"]`, when set, overrides it (the thread count
    instead, with "overrides": "threads": a one-process server's). Last, a rule with
    "least_processes" (and its "least_reason") raises a lower process count to it. `line` says
    what was found and what was chosen, for the server's log.
    """
    cpus = box["cpus"]
    processes = count_at(rule["processes"], cpus)
    threads = count_at(rule["threads"], cpus)
    counted = rule.get("overrides", "processes")  # the count that scales, and is overridden
    per_cpu, base = rule[counted]
    why = ["rule {:g} x {:g} CPUs{}".format(per_cpu, cpus, f" {base:+g}" if base else "")]
    low, high = rule["measured_cpus"]
    if not low <= cpus <= high:
        why.append(f"extrapolated: measured {low:g}-{high:g} CPUs")
    memory = box["memory"]
    found = "{:g} CPUs ({})".format(cpus, box["cpus_from"])
    if memory is None:
        found += ", no memory limit"
    else:
        found += ", {} memory ({})".format(_mb(memory), box["memory_from"])
        budget = memory * (1 - rule["margin"]) - rule["master_mb"] * 2**20
        fits = int(budget // (rule["process_mb"] * 2**20))
        if fits < processes:
            why.append(
                "memory fits {} ({:g}M master + {:g}M each, {:.0%} kept free)".format(
                    max(fits, 0), rule["master_mb"], rule["process_mb"], rule["margin"]
                )
            )
            processes = max(1, fits)
    override = environ.get(rule["env"])
    if override is not None:
        if not override.strip().isdigit() or int(override) < 1:
            raise SystemExit(
                "{}={!r}: expected a whole number of {} >= 1 (or leave it unset to "
                "size from the box's limits)".format(rule["env"], override, counted)
            )
        if counted == "threads":
            why.append("{}={} overrides {}".format(rule["env"], int(override), threads))
            threads = int(override)
        else:
            why.append("{}={} overrides {}".format(rule["env"], int(override), processes))
            processes = int(override)
    least = rule.get("least_processes", 1)
    if processes < least:
        why.append("at least {}: {}".format(least, rule["least_reason"]))
        processes = least
    chose = "{} x {}".format(_plural(processes, "process"), _plural(threads, "thread"))
    line = "sizing: found {}; chose {} ({})".format(found, chose, "; ".join(why))
    return {"processes": processes, "threads": threads, "line": line}


def boot_source():
    """This module's code, for a written file to run at boot (no docstring, no `tuner`)."""
    with open(__file__, encoding="utf-8") as handle:
        text = handle.read()
    start = text.index("import math")
    end = text.index("def boot_source")
    return text[start:end].rstrip() + "\n"
