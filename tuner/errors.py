"""The tuner's exceptions.

TunerError                 base; the CLI prints "error: <msg>" and exits 2 (bad input) or 1
├── ConfigError            bad CLI option, setting, search space, workload or storage URL
├── ToolMissingError       gunicorn / uwsgi / wrk binary not on PATH
├── AppBrokenError         the app cannot be imported under any config: abort the study
└── TrialError             this candidate config failed; a study records it and goes on
    ├── ServerStartError   the server exited while starting (exit code + log tail)
    │   └── PortInUseError another process holds the port (the runner retries another)
    ├── ReadinessTimeout   the server did not answer 2xx before the deadline
    ├── ServerCrashed      the server died during the measurement
    ├── OutOfMemory        the OOM killer hit the server under --memory-limit
    └── InvalidMeasurement the measurement cannot be trusted (e.g. too many errors)
"""

from __future__ import annotations


class TunerError(Exception):
    """Base of every error the tuner reports to the user as one line."""

    exit_code = 1


class ConfigError(TunerError):
    exit_code = 2


class ToolMissingError(TunerError):
    exit_code = 2


class AppBrokenError(TunerError):
    exit_code = 2


class TrialError(TunerError):
    """A candidate config failed; `reason` is a short one-line label for the trial record."""

    reason = "failed"


class ServerStartError(TrialError):
    reason = "server_exited"

    def __init__(self, message: str, returncode: int | None = None, log_tail: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.log_tail = log_tail


class PortInUseError(ServerStartError):
    reason = "port_in_use"


class ReadinessTimeout(TrialError):
    reason = "not_ready"

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


class ServerCrashed(TrialError):
    reason = "crashed"


class OutOfMemory(TrialError):
    reason = "oom_killed"


class InvalidMeasurement(TrialError):
    reason = "invalid_measurement"
