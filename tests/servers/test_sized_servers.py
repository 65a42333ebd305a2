"""Files sized at boot for the servers past gunicorn and uWSGI, as text and as run (no server):
the Python files compute their counts themselves; a server configured on its command line gets
its shell launcher reading the counts from variables and a Python launcher beside it that
computes them on a fake box (a cgroup tree laid out as v2 lays it out) and runs the shell
launcher, which here runs a stand-in for the server that prints what it was given."""

from __future__ import annotations

import ast
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tests.machine.test_bootlimits import Box
from tuner.apps import AppRef, Interface
from tuner.machine import bootlimits
from tuner.machine.sizing import SizePoint, SizingRule, fit_rule
from tuner.servers import get_adapter
from tuner.servers.base import Artifact, Bind, ServerAdapter
from tuner.settings import Value

BIND = Bind.tcp("127.0.0.1", 8000)
MB = 2**20


def rule(threads: bool = True) -> SizingRule:
    """2 processes x 4 threads at 0.5 CPU, 4 x 8 at 1: 4 x CPUs by 8 x CPUs; a 40M master and
    40M per process. The env given here is not the server's: render_sized writes its own."""
    points = [SizePoint(0.5, 2, 4 if threads else 1), SizePoint(1.0, 4, 8 if threads else 1)]
    return fit_rule(points, [(2, 120.0), (4, 200.0)], "NOT_THE_SERVERS")


def one_process_rule() -> SizingRule:
    """A one-process server's points: 4 threads at 0.5 CPU, 8 at 1."""
    return fit_rule([SizePoint(0.5, 1, 4), SizePoint(1.0, 1, 8)], [(1, 50.0)], "NOT_THE_SERVERS")


def serving(name: str, interface: Interface = Interface.WSGI) -> tuple[ServerAdapter, AppRef]:
    return get_adapter(name).serving(interface), AppRef("hello", "app", "/srv/app", interface)


def literal(text: str) -> dict[str, object]:
    """The SIZING_RULE a written file holds."""
    line = next(line for line in text.splitlines() if line.startswith("SIZING_RULE = "))
    return ast.literal_eval(line.removeprefix("SIZING_RULE = "))


# --- servers whose file is Python and computes ---------------------------------------------

PYTHON_FILES = [
    # (server, interface, values, the override variable, the lines that take the counts)
    ("hypercorn", Interface.ASGI, {}, "HYPERCORN_WORKERS", ['workers = SIZED["processes"]']),
    ("bjoern", Interface.WSGI, {}, "BJOERN_PROCESSES", ['PROCESSES = SIZED["processes"]']),
    ("cheroot", Interface.WSGI, {}, "CHEROOT_THREADS", ['THREADS = SIZED["threads"]']),
    ("twisted", Interface.WSGI, {}, "TWISTED_THREADS", ['THREADS = SIZED["threads"]']),
    ("gunicorn", Interface.ASGI, {}, "WEB_CONCURRENCY", ['workers = SIZED["processes"]']),
]


@pytest.mark.parametrize(("name", "interface", "values", "env", "takes"), PYTHON_FILES)
def test_a_python_file_computes_its_counts_and_names_its_variable(
    name: str, interface: Interface, values: dict[str, Value], env: str, takes: list[str]
) -> None:
    adapter, app = serving(name, interface)
    assert adapter.sizing_env == env
    (script,) = adapter.render_sized(app, BIND, values, rule(), header="study s")
    compile(script.text, script.filename, "exec")
    assert bootlimits.boot_source() in script.text
    for line in takes:
        assert line in script.text.splitlines()
    held = literal(script.text)
    assert held["env"] == env
    one_process = adapter.process_model.processes is None
    assert held.get("overrides", "processes") == ("threads" if one_process else "processes")
    count = "thread" if one_process else "process"
    assert f"{env}=N overrides the {count} count" in script.text


def test_a_one_process_launcher_overrides_its_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter, app = serving("cheroot")
    values: dict[str, Value] = {"threads": 4, "max_threads": 6}
    (script,) = adapter.render_sized(app, BIND, values, one_process_rule())
    # The tuned constants and the sizing code, up to where the server would start.
    text = script.text
    start = text.index("# Tuned settings")
    end = text.index("\n".join(adapter.server_code(adapter.resolve(values))))
    monkeypatch.setenv("CHEROOT_THREADS", "12")
    scope: dict[str, object] = {}
    part = "import os\nimport sys\n" + text[start:end]
    exec(compile(part, script.filename, "exec"), scope)  # noqa: S102 - our own file
    assert scope["THREADS"] == 12 and scope["MAX_THREADS"] == 12  # the bound follows the pool
    sized = scope["SIZED"]
    assert isinstance(sized, dict) and sized["processes"] == 1
    assert "CHEROOT_THREADS=12 overrides" in str(sized["line"])


def test_hypercorn_s_config_keeps_only_its_settings_and_pickles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hypercorn.config as config_module

    adapter = get_adapter("hypercorn")
    app = AppRef("hello", "app", str(tmp_path), Interface.ASGI)
    (script,) = adapter.render_sized(app, BIND, {}, rule(), filename="sized.py")
    assert script.run_hint == "hypercorn --config file:sized.py hello:app"
    assert "# Run: hypercorn --config file:sized.py hello:app" in script.text
    path = tmp_path / script.filename
    path.write_text(script.text)
    monkeypatch.chdir(tmp_path)  # the file changes to the app's folder
    config = config_module.Config.from_pyfile(str(path))
    box = bootlimits.read_box()
    assert config.workers == rule().counts(box["cpus"], box["memory"])[0]
    assert not {"SIZED", "SIZING_RULE", "size", "read_box"} & set(vars(config))
    pickle.dumps(config)  # what hypercorn hands the workers it spawns
    monkeypatch.setenv("HYPERCORN_WORKERS", "3")
    assert config_module.Config.from_pyfile(str(path)).workers == 3


def test_gunicorn_s_uvicorn_worker_keeps_its_worker_class_lines() -> None:
    adapter, app = serving("gunicorn", Interface.ASGI)
    values: dict[str, Value] = {"loop": "asyncio", "limit_concurrency": 10}
    (conf,) = adapter.render_sized(app, BIND, values, rule(threads=False))
    lines = conf.text.splitlines()
    assert "worker_class = TunedUvicornWorker" in lines
    assert "class TunedUvicornWorker(UvicornWorker):" in lines
    assert not any(line.startswith("threads") for line in lines)
    (stock,) = adapter.render_sized(app, BIND, {}, rule(threads=False))
    assert "worker_class = 'uvicorn_worker.UvicornWorker'" in stock.text.splitlines()


# --- servers configured on their command line --------------------------------------------

COMMAND_LINE = [
    # (server, interface, values, the launcher, the variables, the shell text that reads them)
    (
        "waitress",
        Interface.WSGI,
        {"threads": 6},
        {"threads": "WAITRESS_THREADS"},
        ['--threads="${WAITRESS_THREADS:-6}"'],
    ),
    (
        "uvicorn",
        Interface.ASGI,
        {"workers": 3},
        {"processes": "WEB_CONCURRENCY"},
        ['--workers "${WEB_CONCURRENCY:-3}"'],
    ),
    (
        "granian",
        Interface.WSGI,
        {"workers": 3, "blocking_threads": 5},
        {"processes": "GRANIAN_WORKERS", "threads": "GRANIAN_BLOCKING_THREADS"},
        [
            "GRANIAN_WORKERS=${GRANIAN_WORKERS:-3}",
            "GRANIAN_BLOCKING_THREADS=${GRANIAN_BLOCKING_THREADS:-5}",
        ],
    ),
    (
        "granian",
        Interface.ASGI,
        {"workers": 3},
        {"processes": "GRANIAN_WORKERS"},
        ["GRANIAN_WORKERS=${GRANIAN_WORKERS:-3}"],
    ),
    (
        "mod_wsgi",
        Interface.WSGI,
        {},
        {"processes": "MOD_WSGI_PROCESSES", "threads": "MOD_WSGI_THREADS"},
        ['--processes "${MOD_WSGI_PROCESSES:-1}"', '--threads "${MOD_WSGI_THREADS:-5}" "$@"'],
    ),
]
IDS = [f"{case[0]}-{case[1].value}" for case in COMMAND_LINE]


def sized_files(
    name: str,
    interface: Interface,
    values: dict[str, Value],
    folder: Path,
    header: str = "",
    filename: str | None = None,
) -> tuple[Artifact, ...]:
    adapter, _ = serving(name, interface)
    app = AppRef("hello", "app", str(folder), interface)
    sizing = one_process_rule() if adapter.process_model.processes is None else rule()
    return adapter.render_sized(app, BIND, values, sizing, header=header, filename=filename)


def render(
    name: str,
    interface: Interface,
    values: dict[str, Value],
    folder: Path,
    header: str = "",
    filename: str | None = None,
) -> tuple[ServerAdapter, Artifact, Artifact]:
    """(the adapter, its Python launcher, the shell launcher that runs the server)."""
    launcher, script, *_ = sized_files(name, interface, values, folder, header, filename)
    return serving(name, interface)[0], launcher, script


@pytest.mark.parametrize(
    ("name", "interface", "values", "variables", "reads"), COMMAND_LINE, ids=IDS
)
def test_a_command_line_server_gets_a_launcher_beside_its_shell_file(
    tmp_path: Path,
    name: str,
    interface: Interface,
    values: dict[str, Value],
    variables: dict[str, str],
    reads: list[str],
) -> None:
    adapter, launcher, script = render(name, interface, values, tmp_path, header="study s")
    assert launcher.filename == f"{name}_sized.py" and launcher.mode == 0o755
    assert launcher.run_hint == f"python3 {name}_sized.py"
    assert script.filename == adapter.artifact_filename and script.run_hint.startswith("sh ")
    compile(launcher.text, launcher.filename, "exec")
    held = literal(launcher.text)
    assert held["env"] == adapter.sizing_env and adapter.sizing_env in variables.values()
    for count, variable in variables.items():
        assert f"os.environ[{variable!r}] = str(SIZED[{count!r}])" in launcher.text
        assert f"{count} from {variable}" in script.text  # its header says where they come from
    lines = [line.removesuffix("\\").strip() for line in script.text.splitlines()]
    for line in reads:
        assert line in lines, f"{line!r} not in {script.filename}"
    path = tmp_path / script.filename
    path.write_text(script.text)
    subprocess.run(["sh", "-n", str(path)], check=True)
    # The check before the boot reads the launcher as Python (not with the shell file's sh -n).
    first = tmp_path / launcher.filename
    first.write_text(launcher.text)
    check = adapter.sized_check_argv(first, AppRef("hello", "app", str(tmp_path), interface))
    assert check is not None and "-n" not in check
    subprocess.run(check, check=True, capture_output=True)
    # Its own name, when --out names it otherwise.
    _, named_launcher, named = render(name, interface, values, tmp_path, filename="serve.sh")
    assert named.filename == "serve.sh" and named.run_hint == "sh serve.sh"
    assert "'serve.sh'" in named_launcher.text


# What the stand-in prints: its arguments, then each variable a launcher may set.
STAND_IN = """#!/bin/sh
echo "ARGV $*"
for name in WAITRESS_THREADS WEB_CONCURRENCY GRANIAN_WORKERS GRANIAN_BLOCKING_THREADS \\
    MOD_WSGI_PROCESSES MOD_WSGI_THREADS; do
  eval "echo ENV $name=\\${$name-}"
done
"""
# mod_wsgi-express's start, as well: it opens its stderr to write (a log file is emptied),
# then Apache's start sources its --envvars-script.
MOD_WSGI_START = """: > /dev/stderr
previous=
for word in "$@"; do
  if [ "$previous" = --envvars-script ]; then . "$word"; fi
  previous=$word
done
"""
# The server each shell launcher runs (its first word after exec).
PROGRAMS = {"waitress": "waitress-serve", "uvicorn": "uvicorn", "granian": "granian"}


def fake_box(root: Path, cpu_max: str, memory_max: str = "max") -> tuple[str, str]:
    """A v2 box in its own namespace: (its /proc/self/cgroup, its /proc/self/mountinfo)."""
    box = Box(root)
    point = box.mount("cgroup2", "")
    box.cgroup_lines = ["0::/"]
    box.write(point, cpu_max=cpu_max, memory_max=memory_max)
    box.read()
    return str(root / "proc/cgroup"), str(root / "proc/mountinfo")


def run_launcher(
    tmp_path: Path,
    name: str,
    interface: Interface,
    values: dict[str, Value],
    box: tuple[str, str],
    log: Path | None = None,
    **environ: str,
) -> subprocess.CompletedProcess[str]:
    """Write the sized files, point the launcher's limit reader at `box`, and run it with a
    stand-in server first on PATH; its stderr into the file `log` if given."""
    folder = tmp_path / "deploy"
    folder.mkdir(exist_ok=True)
    launcher, script, *beside = sized_files(name, interface, values, folder)
    proc_cgroup, mountinfo = box
    text = launcher.text.replace(
        f'PROC_CGROUP = "{bootlimits.PROC_CGROUP}"', f"PROC_CGROUP = {proc_cgroup!r}"
    ).replace(f'PROC_MOUNTINFO = "{bootlimits.PROC_MOUNTINFO}"', f"PROC_MOUNTINFO = {mountinfo!r}")
    assert text.count(proc_cgroup) == 1 and text.count(mountinfo) == 1
    (folder / launcher.filename).write_text(text)
    for artifact in (script, *beside):
        (folder / artifact.filename).write_text(artifact.text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stand_in = bin_dir / PROGRAMS.get(name, "mod_wsgi-express")
    stand_in.write_text(STAND_IN + (MOD_WSGI_START if name == "mod_wsgi" else ""))
    stand_in.chmod(0o755)
    ours = ("WAITRESS_", "GRANIAN_", "MOD_WSGI_", "WEB_CONCURRENCY")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
    env = {**clean, **environ, "PATH": os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])}
    if log is None:
        return subprocess.run(
            [sys.executable, str(folder / launcher.filename)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    with open(log, "w") as handle:
        return subprocess.run(
            [sys.executable, str(folder / launcher.filename)],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=handle,
            text=True,
            timeout=60,
            check=False,
        )


def stand_in_saw(done: subprocess.CompletedProcess[str]) -> tuple[str, dict[str, str], str]:
    """(the stand-in's arguments, the variables it had, the launcher's stderr)."""
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    argv = next(line for line in out if line.startswith("ARGV "))
    found = dict(line[4:].split("=", 1) for line in out if line.startswith("ENV "))
    return argv, found, done.stderr


def expected_argv(name: str, processes: int, threads: int) -> list[str]:
    """The words of the stand-in's argv that carry the counts."""
    if name == "waitress":
        return [f"--threads={threads}"]
    if name == "uvicorn":
        return [f"--workers {processes}"]
    if name == "mod_wsgi":
        return [f"--processes {processes} --threads {threads}"]
    return []  # granian reads its variables


@pytest.mark.parametrize(
    ("name", "interface", "values", "variables", "reads"), COMMAND_LINE, ids=IDS
)
def test_the_launcher_runs_the_server_with_the_counts_of_the_box(
    tmp_path: Path,
    name: str,
    interface: Interface,
    values: dict[str, Value],
    variables: dict[str, str],
    reads: list[str],
) -> None:
    adapter, _ = serving(name, interface)
    sizing = one_process_rule() if adapter.process_model.processes is None else rule()
    box = fake_box(tmp_path / "box", cpu_max="50000 100000")  # 0.5 CPU, no memory limit
    processes, threads = sizing.counts(0.5)
    argv, found, stderr = stand_in_saw(run_launcher(tmp_path, name, interface, values, box))
    assert "sizing: found 0.5 CPUs (cgroup v2 " in stderr
    assert f"chose {processes} process" in stderr
    for words in expected_argv(name, processes, threads):
        assert f" {words} " in f"{argv} ", argv
    counts = {"processes": processes, "threads": threads}
    assert {variable: found[variable] for variable in variables.values()} == {
        variable: str(counts[count]) for count, variable in variables.items()
    }
    # Under a memory limit too small for the rule's processes, fewer (one-process: threads).
    memory_box = fake_box(tmp_path / "box2", cpu_max="100000 100000", memory_max=str(160 * MB))
    processes, threads = sizing.counts(1.0, 160 * MB)
    _, found, stderr = stand_in_saw(run_launcher(tmp_path, name, interface, values, memory_box))
    assert "160M memory (cgroup v2 " in stderr
    counts = {"processes": processes, "threads": threads}
    for count, variable in variables.items():
        assert found[variable] == str(counts[count])
    # The server's variable, set by hand, is the count.
    override = str(adapter.sizing_env)
    done = run_launcher(tmp_path, name, interface, values, box, **{override: "7"})
    _, found, stderr = stand_in_saw(done)
    assert f"{override}=7 overrides" in stderr and found[override] == "7"


def test_mod_wsgi_s_sizing_line_outlasts_the_log_file_its_start_empties(tmp_path: Path) -> None:
    # Printed before mod_wsgi-express starts, the line would be erased with the file.
    box = fake_box(tmp_path / "box", cpu_max="50000 100000")
    log = tmp_path / "server.log"
    done = run_launcher(tmp_path, "mod_wsgi", Interface.WSGI, {}, box, log=log)
    assert done.returncode == 0 and "ARGV " in done.stdout
    lines = [line for line in log.read_text().splitlines() if "sizing:" in line]
    assert len(lines) == 1 and "sizing: found 0.5 CPUs (cgroup v2 " in lines[0], lines


def test_a_bad_override_stops_the_launcher_before_the_server(tmp_path: Path) -> None:
    box = fake_box(tmp_path / "box", cpu_max="50000 100000")
    done = run_launcher(tmp_path, "waitress", Interface.WSGI, {}, box, WAITRESS_THREADS="many")
    assert done.returncode == 1 and "ARGV" not in done.stdout
    assert done.stderr.strip() == (
        "WAITRESS_THREADS='many': expected a whole number of threads >= 1 (or leave it unset "
        "to size from the box's limits)"
    )


def test_the_override_counts_threads_for_a_one_process_rule() -> None:
    held = {**one_process_rule().literal(), "overrides": "threads", "env": "WAITRESS_THREADS"}
    box = {"cpus": 1.0, "cpus_from": "x", "memory": None, "memory_from": ""}
    sized = bootlimits.size(held, box, {"WAITRESS_THREADS": "3"})
    assert (sized["processes"], sized["threads"]) == (1, 3)
    assert "rule 8 x 1 CPUs" in sized["line"] and "WAITRESS_THREADS=3 overrides 8" in sized["line"]
    assert bootlimits.size(held, box, {})["threads"] == 8


def test_the_rule_keeps_what_its_variable_overrides() -> None:
    plain = rule()
    assert "overrides" not in plain.literal()  # gunicorn's and uWSGI's files are as before
    threads = SizingRule.from_dict({**plain.to_dict(), "overrides": "threads"})
    assert threads.literal()["overrides"] == "threads"
    assert SizingRule.from_dict(threads.to_dict()) == threads
    legacy = {k: v for k, v in plain.to_dict().items() if k != "overrides"}
    assert SizingRule.from_dict(legacy) == plain  # a study recorded before the field


def test_uvicorn_recycling_workers_never_gets_one_worker(tmp_path: Path) -> None:
    # One worker runs without uvicorn's supervisor: limit_max_requests would stop it for good.
    values: dict[str, Value] = {"workers": 2, "limit_max_requests": 100}
    launcher, script = sized_files("uvicorn", Interface.ASGI, values, tmp_path)
    held = literal(launcher.text)
    assert held["least_processes"] == 2 and "supervisor" in str(held["least_reason"])
    assert "# At least 2 processes on any box" in script.text  # the rule's header says so
    box = fake_box(tmp_path / "box", cpu_max="10000 100000")  # 0.1 CPU: the rule gives 1
    assert rule().counts(0.1)[0] == 1
    _, found, stderr = stand_in_saw(run_launcher(tmp_path, "uvicorn", Interface.ASGI, values, box))
    assert found["WEB_CONCURRENCY"] == "2"
    assert "chose 2 processes x" in stderr and "; at least 2: limit_max_requests" in stderr
    # Set by hand to 1, the override is raised too; a count above the floor is kept.
    done = run_launcher(tmp_path, "uvicorn", Interface.ASGI, values, box, WEB_CONCURRENCY="1")
    _, found, stderr = stand_in_saw(done)
    assert found["WEB_CONCURRENCY"] == "2" and "WEB_CONCURRENCY=1 overrides" in stderr
    whole = fake_box(tmp_path / "whole", cpu_max="100000 100000")
    _, found, stderr = stand_in_saw(
        run_launcher(tmp_path, "uvicorn", Interface.ASGI, values, whole)
    )
    assert found["WEB_CONCURRENCY"] == str(rule().counts(1.0)[0]) and "at least" not in stderr
    plain = fake_box(tmp_path / "plain", cpu_max="10000 100000")
    _, found, stderr = stand_in_saw(run_launcher(tmp_path, "uvicorn", Interface.ASGI, {}, plain))
    assert found["WEB_CONCURRENCY"] == "1"  # without recycling, one worker is uvicorn alone
    assert "at least" not in stderr
    plain_launcher, _ = sized_files("uvicorn", Interface.ASGI, {}, tmp_path)
    assert "least_processes" not in literal(plain_launcher.text)
