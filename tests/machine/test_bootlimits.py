"""The limits a sized file reads at boot, on cgroup trees laid out as the kernel lays them out
(v2, v1, hybrid; nested groups; namespaced and bind-mounted views), and the counts it chooses."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tuner.machine import bootlimits
from tuner.machine.bootlimits import cgroup_folders, read_box, size

MB = 2**20


class Box:
    """A fake /proc/self (cgroup, mountinfo) and the cgroup folders its mounts point at."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.mounts: list[str] = []
        self.cgroup_lines: list[str] = []

    def mount(self, kind: str, name: str, root: str = "/", options: str = "rw") -> Path:
        point = self.root / "sys/fs/cgroup" / name
        point.mkdir(parents=True, exist_ok=True)
        escaped = str(point).replace(" ", "\\040")
        number = 30 + len(self.mounts)
        self.mounts.append(
            f"{number} 25 0:{number} {root} {escaped} rw,relatime shared:9 - {kind} {kind} "
            f"{options}"
        )
        return point

    def write(self, folder: Path, **files: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name.replace("_", ".", 1)).write_text(text + "\n")

    def read(self, affinity: int = 4) -> dict[str, object]:
        proc = self.root / "proc"
        proc.mkdir(exist_ok=True)
        (proc / "cgroup").write_text("\n".join(self.cgroup_lines) + "\n")
        (proc / "mountinfo").write_text("\n".join(self.mounts) + "\n")
        return read_box(str(proc / "cgroup"), str(proc / "mountinfo"), affinity=affinity)


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


def test_v2_in_its_own_namespace_reads_the_mount_root(box: Box) -> None:
    point = box.mount("cgroup2", "")
    box.cgroup_lines = ["0::/"]
    box.write(point, cpu_max="50000 100000", memory_max=str(256 * MB))
    found = box.read()
    assert found["cpus"] == 0.5 and found["memory"] == 256 * MB
    assert found["cpus_from"] == f"cgroup v2 {point}/cpu.max"
    assert found["memory_from"] == f"cgroup v2 {point}/memory.max"


def test_v2_without_limits_leaves_the_affinity_mask(box: Box) -> None:
    point = box.mount("cgroup2", "")
    box.cgroup_lines = ["0::/"]
    box.write(point, cpu_max="max 100000", memory_max="max")
    found = box.read(affinity=3)
    assert found == {
        "cpus": 3.0,
        "cpus_from": "the affinity mask",
        "memory": None,
        "memory_from": "",
    }


def test_v2_nested_groups_take_the_lowest_limit_up_the_tree(box: Box) -> None:
    point = box.mount("cgroup2", "")
    box.cgroup_lines = ["0::/kubepods/pod1/ctr"]
    box.write(point / "kubepods", cpu_max="max 100000", memory_max="max")
    box.write(point / "kubepods/pod1", cpu_max="150000 100000", memory_max=str(512 * MB))
    box.write(point / "kubepods/pod1/ctr", cpu_max="max 100000", memory_max=str(768 * MB))
    found = box.read()
    assert found["cpus"] == 1.5 and found["cpus_from"].endswith("kubepods/pod1/cpu.max")
    assert found["memory"] == 512 * MB and found["memory_from"].endswith("pod1/memory.max")


def test_a_quota_above_the_affinity_mask_leaves_the_mask(box: Box) -> None:
    point = box.mount("cgroup2", "")
    box.cgroup_lines = ["0::/"]
    box.write(point, cpu_max="400000 100000")
    assert box.read(affinity=2)["cpus"] == 2.0


def test_a_mount_rooted_at_the_group_reads_below_its_root(box: Box) -> None:
    # No cgroup namespace: /proc/self/cgroup shows the host's path, the mount's root is the
    # container's group (mountinfo's fourth field).
    point = box.mount("cgroup2", "", root="/kubepods/pod1")
    box.cgroup_lines = ["0::/kubepods/pod1/ctr"]
    box.write(point / "ctr", cpu_max="25000 100000")
    assert cgroup_folders("cpu", *box_files(box)) == (2, [str(point / "ctr"), str(point)])
    assert box.read()["cpus"] == 0.25


def test_a_path_outside_the_mount_view_falls_back_to_the_mount_point(box: Box) -> None:
    point = box.mount("cgroup2", "")
    box.cgroup_lines = ["0::/../../elsewhere"]
    box.write(point, cpu_max="75000 100000")
    assert cgroup_folders("cpu", *box_files(box)) == (2, [str(point)])
    assert box.read()["cpus"] == 0.75


def test_v1_reads_quota_period_and_the_hierarchical_memory_limit(box: Box) -> None:
    cpu = box.mount("cgroup", "cpu,cpuacct", options="rw,cpu,cpuacct")
    memory = box.mount("cgroup", "memory", options="rw,memory")
    box.mount("cgroup2", "unified")  # hybrid: v2 mounted, with no controllers
    box.cgroup_lines = ["5:memory:/docker/abc", "3:cpu,cpuacct:/docker/abc", "0::/"]
    box.write(cpu / "docker/abc", cpu_cfs_quota_us="50000", cpu_cfs_period_us="100000")
    box.write(cpu, cpu_cfs_quota_us="-1", cpu_cfs_period_us="100000")
    unlimited = str(9223372036854771712)
    box.write(
        memory / "docker/abc",
        memory_limit_in_bytes=unlimited,
        memory_stat=f"cache 0\nhierarchical_memory_limit {300 * MB}\nrss 1",
    )
    box.write(memory, memory_limit_in_bytes=unlimited)
    found = box.read()
    assert found["cpus"] == 0.5
    assert found["cpus_from"] == f"cgroup v1 {cpu}/docker/abc/cpu.cfs_quota_us"
    assert found["memory"] == 300 * MB and found["memory_from"].endswith("abc/memory.stat")


def test_v1_unlimited_everywhere_is_no_limit(box: Box) -> None:
    cpu = box.mount("cgroup", "cpu", options="rw,cpu")
    memory = box.mount("cgroup", "memory", options="rw,memory")
    box.cgroup_lines = ["4:memory:/", "1:cpu:/"]
    box.write(cpu, cpu_cfs_quota_us="-1", cpu_cfs_period_us="100000")
    box.write(memory, memory_limit_in_bytes=str(9223372036854771712))
    found = box.read(affinity=2)
    assert found["cpus"] == 2.0 and found["memory"] is None


def test_a_mount_point_with_a_space_is_unescaped(tmp_path: Path) -> None:
    box = Box(tmp_path / "with space")
    point = box.mount("cgroup2", "")
    box.cgroup_lines = ["0::/"]
    box.write(point, cpu_max="50000 100000")
    assert box.read()["cpus"] == 0.5


def test_no_cgroup_mounted_reads_the_affinity_mask(box: Box) -> None:
    box.cgroup_lines = ["0::/"]
    assert box.read(affinity=1) == {
        "cpus": 1.0,
        "cpus_from": "the affinity mask",
        "memory": None,
        "memory_from": "",
    }


def box_files(box: Box) -> tuple[str, str]:
    box.read()
    return str(box.root / "proc/cgroup"), str(box.root / "proc/mountinfo")


# --- the counts -----------------------------------------------------------------------------

RULE = {
    "processes": [2.0, 1.0],
    "threads": [0.0, 4.0],
    "master_mb": 30.0,
    "process_mb": 20.0,
    "margin": 0.2,
    "env": "WEB_CONCURRENCY",
    "measured_cpus": [0.5, 1.0],
}


def on(cpus: float, memory: int | None = None) -> dict[str, object]:
    return {"cpus": cpus, "cpus_from": "x", "memory": memory, "memory_from": "y"}


def test_the_rule_rounds_half_up_and_says_when_it_extrapolates() -> None:
    assert size(RULE, on(0.75), {})["processes"] == 3  # 2.5 rounds up, not to even
    inside = size(RULE, on(1.0), {})
    assert inside["processes"] == 3 and inside["threads"] == 4
    assert "extrapolated" not in inside["line"]
    outside = size(RULE, on(4.0), {})
    assert outside["processes"] == 9 and "extrapolated: measured 0.5-1 CPUs" in outside["line"]


def test_memory_caps_the_processes_with_the_margin() -> None:
    # 0.8 x 130M = 104M, less the master's 30M: 74M, room for 3 processes of 20M.
    capped = size(RULE, on(4.0, 130 * MB), {})
    assert capped["processes"] == 3
    assert "memory fits 3 (30M master + 20M each, 20% kept free)" in capped["line"]
    assert size(RULE, on(0.5, 130 * MB), {})["processes"] == 2  # the rule's 2 fit
    assert size(RULE, on(4.0, 20 * MB), {})["processes"] == 1  # never fewer than one


def test_the_environment_overrides_the_count_and_bad_values_stop_the_boot() -> None:
    chosen = size(RULE, on(0.5, 130 * MB), {"WEB_CONCURRENCY": "7"})
    assert chosen["processes"] == 7 and "WEB_CONCURRENCY=7 overrides 2" in chosen["line"]
    for bad in ("0", "many", "-2", ""):
        with pytest.raises(SystemExit, match=f"WEB_CONCURRENCY='{bad}': expected a whole"):
            size(RULE, on(1.0), {"WEB_CONCURRENCY": bad})


def test_the_line_says_what_was_found_and_what_was_chosen() -> None:
    line = size(RULE, on(0.5, 512 * MB), {})["line"]
    assert line.startswith("sizing: found 0.5 CPUs (x), 512M memory (y); chose 2 processes x 4")


def test_the_boot_source_runs_alone_with_the_standard_library(box: Box) -> None:
    source = bootlimits.boot_source()
    tree = ast.parse(source, feature_version=(3, 8))
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert imported == {"math", "os"}
    assert not any(isinstance(node, ast.ImportFrom) for node in ast.walk(tree))
    point = box.mount("cgroup2", "")
    box.cgroup_lines = ["0::/"]
    box.write(point, cpu_max="50000 100000")
    proc, mountinfo = box_files(box)
    scope: dict[str, object] = {}
    exec(compile(source, "gunicorn.conf.py", "exec"), scope)  # noqa: S102 - our own source
    found = scope["read_box"](proc, mountinfo, 4)  # type: ignore[operator]
    assert found == read_box(proc, mountinfo, 4)
    assert scope["size"](RULE, found, {}) == size(RULE, found, {})  # type: ignore[operator]
