"""Imports run one way: from the command line down to the ground floor, never back up.

`FLOORS` is the order of the tuner's packages (and top-level modules), from the top down. A
module may import its own package and anything on a lower floor; packages on one floor are
independent of each other. The test reads every import under `tuner/` (at module level, inside
functions and under TYPE_CHECKING alike) from the source, without importing it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tuner

PACKAGE = Path(tuner.__file__).parent

# From the top down. The data flow the README states is one chain through it: commands ->
# workflow -> search -> measure -> servers, loadgen, metrics. `tuner` is the package's own
# __init__ (its version).
FLOORS: tuple[tuple[str, ...], ...] = (
    ("__main__",),
    ("cli",),
    ("commands",),  # parse the options, wire the parts together
    ("report",),  # what a person reads, tune's and compare's results included
    ("workflow",),  # tune and compare end to end
    ("search",),  # the study, its spaces (a front's too) and objectives
    ("measure",),  # one measurement: the server, behind its front if any, under load
    ("front",),  # a reverse proxy started in front of the server
    ("procs",),  # a server's process tree: started, ready-checked, stopped
    ("servers", "workload"),  # what each server is; workloads drawn from access logs
    ("appsettings", "loadgen"),  # an app's own settings; the load generator
    ("apps", "logsigns", "machine", "metrics", "settings"),
    ("errors", "files", "interrupts", "tuner"),
)
RANK = {name: floor for floor, names in enumerate(FLOORS) for name in names}


def layer_of(module: str) -> str:
    """`tuner.front.trial` -> `front`; `tuner.cli` -> `cli`; `tuner` -> `tuner`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, tuner module) for every import of the tuner in the file."""
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the file's own package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from tuner import cli` names a module; `from tuner import __version__` does not
            found += [
                (node.lineno, f"{base}.{alias.name}" if _is_module(base, alias.name) else base)
                for alias in node.names
            ]
    # one entry per module and line: `from tuner.x import a, b` is one import of tuner.x
    return sorted({(line, name) for line, name in found if name.split(".")[0] == "tuner"})


def _is_module(base: str, name: str) -> bool:
    folder = PACKAGE.parent.joinpath(*base.split("."))
    return (folder / name).is_dir() or (folder / f"{name}.py").is_file()


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_package_has_a_floor() -> None:
    layers = {layer_of(module_name(path)) for path in sources()}
    assert sorted(layers - RANK.keys()) == [], "place these in FLOORS"
    assert sorted(RANK.keys() - layers) == [], "FLOORS names what is no longer there"


def test_the_readme_flow_runs_down_the_floors() -> None:
    chain = ("commands", "workflow", "search", "measure")
    assert [RANK[name] for name in chain] == sorted(RANK[name] for name in chain)
    assert all(RANK["measure"] < RANK[name] for name in ("servers", "loadgen", "metrics"))


def test_no_import_runs_back_up() -> None:
    wrong = []
    for path in sources():
        source = layer_of(module_name(path))
        for line, name in imported_modules(path):
            target = layer_of(name)
            if target != source and RANK[target] <= RANK[source]:
                where = "beside" if RANK[target] == RANK[source] else "above"
                wrong.append(
                    f"{path.relative_to(PACKAGE.parent)}:{line}: {source} imports {name}, "
                    f"which is {where} it"
                )
    assert wrong == [], "\n".join(wrong)
