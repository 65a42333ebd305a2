"""From an access log's request counts to a workload: templates weighted by frequency.

Requests with the same method whose paths differ only by IDs (`tuner/workload/templates.py`
says which segments count as IDs, and why the rule is conservative) become one entry: its
`path` names the template (`/items/{int}`), its weight is how many requests of the log it
covers, and its `paths` are the concrete targets it replays (query strings included), each
weighted by its own count. A template seen with one target is a plain `path` entry.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

from tuner.loadgen.spec import MAX_PATHS, RequestSpec, Workload
from tuner.workload.access_log import AccessLog
from tuner.workload.templates import fold, template_key

# Concrete targets kept per template by default: the most frequent ones. Enough to spread the
# load over many rows of the app's data, small enough to read the file.
DEFAULT_MAX_VALUES = 100


@dataclass(frozen=True)
class Template:
    method: str
    template: str  # `/items/{int}`, or the literal path when nothing varies
    count: int  # requests of the log it covers
    values: tuple[tuple[str, int], ...]  # concrete targets replayed, most frequent first
    distinct: int  # distinct targets in the log (more than `values` when cut)

    def request(self) -> RequestSpec:
        if len(self.values) == 1:
            return RequestSpec(method=self.method, path=self.values[0][0], weight=self.count)
        paths = tuple((target, float(count)) for target, count in self.values)
        return RequestSpec(method=self.method, path=self.template, weight=self.count, paths=paths)


@dataclass(frozen=True)
class LogWorkload:
    templates: tuple[Template, ...]  # most frequent first; the first `sample` when sampled
    found: int  # templates in the log, before sampling
    log: AccessLog

    @property
    def workload(self) -> Workload:
        return Workload(tuple(t.request() for t in self.templates))

    @property
    def covered(self) -> int:
        """Requests of the log that the kept templates cover."""
        return sum(t.count for t in self.templates)


def workload_from_log(
    log: AccessLog, *, sample: int | None = None, max_values: int = DEFAULT_MAX_VALUES
) -> LogWorkload:
    """The log's templates, most frequent first (ties by template, then method); `sample`
    keeps that many, `max_values` the most frequent concrete targets of each."""
    max_values = min(max_values, MAX_PATHS)
    groups: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for (method, target), count in log.counts.items():
        groups[method, template_key(target)][target] = count
    templates = []
    for (method, _key), targets in groups.items():
        values = sorted(targets.items(), key=lambda item: (-item[1], item[0]))
        templates.append(
            Template(
                method=method,
                template=fold(targets),
                count=sum(targets.values()),
                values=tuple(values[:max_values]),
                distinct=len(values),
            )
        )
    templates.sort(key=lambda t: (-t.count, t.template, t.method))
    kept = templates if sample is None else templates[:sample]
    return LogWorkload(templates=tuple(kept), found=len(templates), log=log)


def render_toml(result: LogWorkload, source: str) -> str:
    """The workload file (`--workload FILE`), with comments saying where each figure came
    from."""
    log = result.log
    lines = [
        f"# Workload from the access log {source} (tuner workload from-log).",
        f"# {log.requests} replayable requests in {log.lines} lines; "
        f"{result.found} templates, {len(result.templates)} kept, covering "
        f"{result.covered} requests.",
        "# weight: requests of the log; [requests.paths]: the concrete paths replayed,",
        "# with their counts in the log. Paths that differ only by IDs share a template.",
    ]
    for template in result.templates:
        request = template.request()
        lines += ["", "[[requests]]"]
        lines.append(f"method = {_string(request.method)}")
        lines.append(f"path = {_string(request.path)}")
        lines.append(f"weight = {template.count}")
        if request.paths:
            lines.append("")
            if template.distinct > len(template.values):
                lines.append(
                    f"# the {len(template.values)} most frequent of "
                    f"{template.distinct} distinct paths"
                )
            lines.append("[requests.paths]")
            lines += [f"{_string(target)} = {count}" for target, count in template.values]
    return "\n".join(lines) + "\n"


def _string(text: str) -> str:
    """A TOML basic string: for ASCII text, JSON's escapes are TOML's."""
    return json.dumps(text, ensure_ascii=True)
