"""`compare --for-cpus`: which servers take part, and what the page and JSON say of the sizes.

The measuring is `tune --for-cpus`'s own (tuner/workflow/sizes.py), run per server: this is only
the choice of servers and the words around it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tuner.errors import ConfigError
from tuner.servers import get_adapter

LEFT_OUT = "left out, as they write no file sized at boot yet: "


@dataclass(frozen=True)
class SizedFor:
    """--for-cpus in a compare: the sizes (none without it), and the servers `all` left out."""

    sizes: tuple[float, ...] = ()
    left_out: tuple[str, ...] = ()

    def kept(self, servers: Sequence[str]) -> list[str]:
        """`servers` without those left out."""
        return [name for name in servers if name not in self.left_out]

    def left_out_line(self) -> str:
        """Said once, after the servers: those `all` left out ("" when none)."""
        return f"--for-cpus: {LEFT_OUT}{', '.join(self.left_out)}" if self.left_out else ""

    def summary(self) -> list[str]:
        """The page's lines: where the servers were ranked, what was left out."""
        if not self.sizes:
            return []
        given = ",".join(f"{cpus:g}" for cpus in self.sizes)
        lines = [
            f"Sized at boot (--for-cpus {given}): the servers are ranked at {self.sizes[-1]:g} "
            "CPUs, the largest size; each written file computes its process and thread counts "
            "at boot by the rule in its table below, fitted through the best counts measured "
            "at each size."
        ]
        if self.left_out:
            lines.append(f"Servers {LEFT_OUT}{', '.join(self.left_out)}.")
        return lines

    def to_json(self) -> dict[str, object]:
        return {"for_cpus": list(self.sizes) or None, "left_out": list(self.left_out)}


def sizable(servers: Sequence[str], text: str, sizes: tuple[float, ...]) -> SizedFor:
    """The --for-cpus of a compare of `servers` (as `--servers text` gave them): of `all`, the
    servers that write no file sized at boot are left out, as `all` leaves out those that
    cannot serve the app; a named one is refused in one line naming those that can, before
    anything is measured."""
    if not sizes:
        return SizedFor()
    left = tuple(name for name in servers if get_adapter(name).sizing_env is None)
    if left and text.strip().lower() != "all":
        from tuner.workflow.sizes import unsized  # the study's modules: when run

        raise unsized(list(left), "compare")
    able = [name for name in servers if name not in left]
    if len(able) < 2:
        raise ConfigError(
            f"--servers {text!r} --for-cpus: fewer than two of the servers installed here "
            f"write a file sized at boot ({', '.join(able) or 'none'})"
        )
    return SizedFor(sizes, left)
