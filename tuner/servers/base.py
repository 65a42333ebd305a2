"""The adapter contract: everything the tuner needs to know about one server, as data.

An adapter declares its settings table, how to launch the server (argv, environment, generated
files), its process model (does it fork workers; which setting counts processes, which threads),
its baselines, the deployable artifact it writes and how that artifact is booted, and how the
server's log says that it did not start. Nothing outside `tuner/servers/` names a server: the
rest of the tuner only reads these declarations, so adding a server is its module, its
`search_spaces/NAME.toml` and one registry line.

Shapes differ, so nothing here assumes a config file or pre-forking: gunicorn and uWSGI fork
workers and read a config file; a one-process thread-pool server may be configured only on its
command line, in its environment, or from a small Python launcher the adapter writes.
"""

from __future__ import annotations

import copy
import importlib
import importlib.resources
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from tuner.apps import Interface
from tuner.errors import ConfigError
from tuner.servers.binds import (
    DIRECT,
    HTTP_OVER_TCP,
    Bind,
    Protocol,
    Transport,
    bind_address,
)
from tuner.servers.part_file import (
    Artifact,
    ArtifactRequest,
    FilePart,
    comment_block,
    python_env_lines,
    shell_env_lines,
)
from tuner.servers.part_identity import IdentityPart
from tuner.servers.part_launcher import (
    SYSTEM_PROGRAMS,
    LauncherPart,
    LaunchSpec,
    StartupSigns,
)
from tuner.servers.part_settings import SettingsPart
from tuner.servers.part_sizing import SizedRequest, SizingPart, sizing_code
from tuner.servers.part_workers import (
    BASELINE_DEFAULT,
    BASELINE_FORK_RULE,
    Baseline,
    EventLoops,
    ProcessModel,
    WorkersPart,
    worker_counts,
)

__all__ = [
    "BASELINE_DEFAULT",
    "BASELINE_FORK_RULE",
    "DIRECT",
    "HTTP_OVER_TCP",
    "SYSTEM_PROGRAMS",
    "Artifact",
    "ArtifactRequest",
    "Baseline",
    "Bind",
    "EventLoops",
    "FilePart",
    "IdentityPart",
    "LaunchSpec",
    "LauncherPart",
    "ProcessModel",
    "Protocol",
    "ServerAdapter",
    "SettingsPart",
    "SizedRequest",
    "SizingPart",
    "StartupSigns",
    "Transport",
    "WorkersPart",
    "bind_address",
    "comment_block",
    "first_version_number",
    "python_env_lines",
    "shell_env_lines",
    "shipped_space",
    "sizing_code",
    "worker_counts",
]


class ServerAdapter(SizingPart):
    """One server, declared, in the parts a server has, each in its own module with the
    defaults most servers share (a server writes only what differs):

    - its name and app interfaces (`IdentityPart`, part_identity.py),
    - its settings table and the checks of a config (`SettingsPart`, part_settings.py),
    - its launcher: program, command line, binds, what a host needs (`LauncherPart`),
    - its workers: process model, counts, baselines, hand grid (`WorkersPart`),
    - its written file and that file's boot (`FilePart`),
    - its files sized at boot (`SizingPart`), for a server that writes them,

    and here, how it is set up for one app interface (`serving`). Each part builds on the ones
    before it. Required: the class attributes without a default, `_launch`, `_render_artifact`,
    `_artifact_launch`, `version` and `concurrency_model`.

    One method per operation, each taking the `Bind` the server listens at: `Bind.tcp(host,
    port)` for a server the load generator reaches, or what a front reaches it by (a unix
    socket, the uwsgi protocol, FastCGI). Where the bind is required it comes right after
    what the operation is about (the app, the file) and before the values: `launch(app, bind,
    values, workdir)`, `render_artifact(app, bind, values, header, env)`, `artifact_launch(path,
    app, bind, values)`. Where it is optional it is the keyword `bind=DIRECT` after the values:
    `resolve(values, bind=...)`, `pins_connections(values, bind=...)`.

    `launch`, `render_artifact`, `artifact_launch`, `render_sized` and `sized_launch` are
    final: each checks the bind against `binds` (`check_bind`) and the app's interface, then
    calls the adapter's hook of the same name with a leading underscore. The check lives in
    the parts, not in each adapter nor in each caller (the runner, the written file's boot,
    the front's block, the tests): adapters are as short either way, but there no caller can
    forget it and no adapter repeats it. The file hooks take one value,
    what the file is rendered from (`_render_artifact(ArtifactRequest)`,
    `_render_sized(SizedRequest)`), built once by the final method. A server that speaks only
    HTTP over TCP reads `bind.host` and `bind.port` in its hooks and needs nothing else. A hook
    that needs another operation calls that one's hook (the bind is checked already); a
    wrapper (`WrappedAdapter`) asks the wrapped adapter's hooks, derived from the parts.
    """

    # A search space shipped outside `search_spaces/` (a plugin's own); None = the shipped one.
    space_file: Path | None = None
    # An interface the server runs through an adapter of its own (gunicorn's uvicorn worker,
    # granian's --interface asgi), named "module:Class" and imported when asked for, as the
    # registry names adapters: it subclasses this one, and an import here would tie the two
    # modules in a loop.
    interface_adapters: Mapping[Interface, str] = MappingProxyType({})

    def serving(self, interface: Interface) -> ServerAdapter:
        """This adapter set up for apps of `interface`, whose `interfaces` is that one alone.
        A server that runs one interface returns itself; one that runs both (gunicorn with the
        uvicorn worker, granian's --interface) returns a copy whose table defaults and search
        space are that interface's. ConfigError for an interface the server cannot run."""
        if interface not in self.interfaces:
            raise ConfigError(f"{self.name} cannot serve {interface.describe()}")
        if self.interfaces == {interface}:
            return self
        target = self.interface_adapters.get(interface)
        if target is not None:
            module, _, name = target.partition(":")
            adapter: ServerAdapter = getattr(importlib.import_module(module), name)()
            return adapter
        alone = copy.copy(self)  # this very table, space and launch, for `interface` alone
        alone.interfaces = frozenset({interface})
        return alone


def shipped_space(stem: str) -> Path:
    """The shipped search space search_spaces/STEM.toml: a server's own (STEM = its name), or
    the one of a server set up for one of its interfaces (gunicorn's for ASGI apps,
    `space_file`). Installed (wheel or editable), that folder is the package
    `tuner.search_spaces`. Run from a checkout, the checkout's own folder comes first: with the
    code on PYTHONPATH, the package would resolve through whichever install exists, possibly
    another checkout's."""
    name = f"{stem}.toml"
    checkout = Path(__file__).resolve().parents[2] / "search_spaces"
    if (checkout / name).is_file():
        return checkout / name
    try:
        folder = importlib.resources.files("tuner.search_spaces")
    except ModuleNotFoundError:  # a broken install; load_space names the missing file
        return checkout / name
    # A real folder: wheels install as files, and load_space reports paths users can open.
    return Path(str(folder / name))


_VERSION = re.compile(r"\d+(?:\.\d+)+")


def first_version_number(text: str) -> str:
    match = _VERSION.search(text)
    return match.group(0) if match else text.strip()
