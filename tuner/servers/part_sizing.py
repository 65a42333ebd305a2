"""The sized-at-boot part of the adapter contract (tuner/servers/base.py): files that compute
their process and thread counts on the box they boot on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import final

from tuner.apps import AppRef
from tuner.errors import ConfigError
from tuner.machine.bootlimits import boot_source
from tuner.machine.sizing import SizingRule
from tuner.servers.binds import Bind
from tuner.servers.part_file import Artifact, ArtifactRequest, FilePart
from tuner.servers.part_launcher import LaunchSpec
from tuner.settings import Value


@dataclass(frozen=True, kw_only=True)
class SizedRequest(ArtifactRequest):
    """An `ArtifactRequest` for the files sized at boot (`render_sized`): the `rule` their
    counts come from (the adapter's own variable in it) and `filename`, the name of the
    config file. Its header already describes the rule."""

    rule: SizingRule
    filename: str


class SizingPart(FilePart):
    """The files that size a server's processes and threads at boot from a rule and the box's
    own limits. A server without `sizing_env` writes none (`render_sized` refuses)."""

    # The environment variable that overrides the process count a file sized at boot computes
    # (the server's own convention: WEB_CONCURRENCY for gunicorn); None: this server writes
    # no such file yet (`render_sized`).
    sizing_env: str | None = None

    @final
    def render_sized(
        self,
        app: AppRef,
        bind: Bind,
        values: Mapping[str, Value],
        rule: SizingRule,
        header: str = "",
        env: Mapping[str, str] | None = None,
        filename: str | None = None,
    ) -> tuple[Artifact, ...]:
        """The files that compute their process and thread counts at boot from `rule` and the
        box's own limits (tuner/machine/bootlimits.py), the one to run first: the config file
        itself where its format computes (gunicorn.conf.py), else a launcher beside it that
        computes and starts the server with the counts. `values` are the other settings (and
        the counts of one measured size, which the file keeps where it cannot compute).
        `filename`: the config file's name, if not `artifact_filename` (a launcher names it).
        The rule, its points and its range go in the header."""
        self.check_bind(bind)
        self.check_app(app)
        if self.sizing_env is None:
            raise ConfigError(
                f"{self.name} writes no file sized at boot yet; size it per box with "
                "--cpu-limit, one study per size"
            )
        # The variable and the count it overrides are this server's (a launcher passes the
        # count on in that same variable), and so are the fewest processes this config runs.
        least, reason = self.sized_least_processes(values)
        rule = replace(
            rule,
            env=self.sizing_env,
            overrides=self.sized_override(),
            least_processes=least,
            least_reason=reason,
        )
        described = "\n".join(["Sized at boot:", *rule.describe_lines()])
        full = f"{header}\n{described}" if header else described
        request = SizedRequest(
            app, bind, values, full, env, rule=rule, filename=filename or self.artifact_filename
        )
        return self._render_sized(request)

    def sized_override(self) -> str:
        """The count `sizing_env` overrides: the processes, or the threads of a one-process
        server (whose threads are what scales)."""
        return "processes" if self.process_model.processes else "threads"

    def sized_least_processes(self, values: Mapping[str, Value]) -> tuple[int, str]:
        """The fewest processes a file sized at boot starts for this config, on any box and
        whatever its override says, and why (`SizingRule.least_processes`): one by default."""
        return 1, ""

    def _render_sized(self, request: SizedRequest) -> tuple[Artifact, ...]:
        """`render_sized` for a bind already checked, by an adapter with `sizing_env`."""
        raise NotImplementedError

    @final
    def sized_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        """How to boot the sized files whose first (`render_sized`) is at `path`, as its
        run_hint says. By default as the artifact: a config file that computes boots as any."""
        self.check_bind(bind)
        self.check_app(app)
        return self._sized_launch(path, app, bind, values)

    def _sized_launch(
        self, path: Path, app: AppRef, bind: Bind, values: Mapping[str, Value]
    ) -> LaunchSpec:
        return self._artifact_launch(path, app, bind, values)

    def sized_check_argv(self, path: Path, app: AppRef) -> list[str] | None:
        """`artifact_check_argv` for the first of the sized files (`render_sized`) at `path`:
        by default the artifact's own check (a config file that computes is still one)."""
        return self.artifact_check_argv(path, app)


def sizing_code(rule: SizingRule) -> list[str]:
    """The lines a sized Python file runs at boot: the limit reader (stdlib only, copied from
    tuner/machine/bootlimits.py) and the rule, then `SIZED = size(...)` with the counts and
    the log line. What follows uses `SIZED["processes"]`, `SIZED["threads"]`, `SIZED["line"]`."""
    return [
        "# --- Sized at boot: reads this box's CPU quota, affinity mask and memory limit (code",
        "# copied from the tuner, standard library only) and applies the rule in the header.",
        *boot_source().splitlines(),
        "",
        "",
        f"SIZING_RULE = {rule.literal()!r}",
        "SIZED = size(SIZING_RULE, read_box(), os.environ)",
    ]
