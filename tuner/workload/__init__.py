"""Workloads drawn from real traffic: an access log becomes a weighted workload file."""

from tuner.workload.access_log import AccessLog, read_access_log
from tuner.workload.from_log import LogWorkload, Template, render_toml, workload_from_log
from tuner.workload.templates import id_kind, template_key

__all__ = [
    "AccessLog",
    "LogWorkload",
    "Template",
    "id_kind",
    "read_access_log",
    "render_toml",
    "template_key",
    "workload_from_log",
]
