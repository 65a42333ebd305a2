"""Search spaces as data: one TOML file per server, validated against its settings table.

A file declares `server = "..."` and one `[params.NAME]` table per tuned setting (bounds
that may use `cpus`, log scale, step, choices, `when` conditions, the setting it maps to). It
names only what it searches: the type, the doc and a choice or bool setting's choices come
from the setting in the adapter's table unless given. The keys are documented in
docs/pages/servers.md, "The search space file". Every problem is a ConfigError "FILE:
params.NAME: what is wrong; what is valid". Sampling goes through `TrialLike`, the three
Optuna methods used, so this module does not need optuna.
"""

from __future__ import annotations

import ast
import operator
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from tuner.errors import ConfigError
from tuner.servers.base import shipped_space
from tuner.settings import Setting, SettingKind, SettingsTable, Value

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10 only
    import tomli as tomllib

TYPES = ("int", "float", "categorical", "bool")
_KEYS = {
    "int": {"low", "high", "log", "step"},
    "float": {"low", "high", "log"},
    "categorical": {"choices"},
    "bool": set(),
}
_COMMON_KEYS = {"type", "setting", "doc", "when", "lanes"}
# The traffic beside the load that a param may wait for (`lanes`, tuner/loadgen/lanes.py).
LANE_KINDS = ("streams", "probe")
# The type a param takes from its setting's kind when the file gives none (and no choices).
_INFERRED = {
    SettingKind.INT: "int",
    SettingKind.FLOAT: "float",
    SettingKind.BOOL: "bool",
    SettingKind.CHOICE: "categorical",
}
# The setting kinds each type can search. An int range suits a float setting (whole numbers
# are floats too); a float range does not suit an int one, nor a range a bool or a choice.
_FITS = {
    "int": {SettingKind.INT, SettingKind.FLOAT},
    "float": {SettingKind.FLOAT},
    "categorical": set(SettingKind),
    "bool": {SettingKind.BOOL},
}
# Load-time checks evaluate cpu expressions for every machine size up to this many CPUs, so a
# range that is empty or out of the setting's limits on some machine fails now, not mid-study.
_MAX_CHECKED_CPUS = 256
_OPS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
}

Bound = int | float | str  # a number, or an expression text in `cpus`


@dataclass(frozen=True)
class Param:
    """One tuned setting. `when` maps earlier param names to the values that enable this one;
    `when_min` maps earlier numeric params to the least value that enables it."""

    name: str
    setting: str
    type: str
    low: Bound | None = None
    high: Bound | None = None
    log: bool = False
    step: int = 1
    choices: tuple[Value, ...] = ()
    doc: str = ""
    when: Mapping[str, tuple[Value, ...]] = field(default_factory=dict)
    when_min: Mapping[str, float] = field(default_factory=dict)
    # Searched only in a study whose load has one of these lanes beside it (a drain or a
    # cap that only streams or a probe can show); empty = always.
    lanes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SearchSpace:
    """A validated space; `table` is the server's settings table (coercion and defaults)."""

    server: str
    params: tuple[Param, ...]
    source: str
    table: SettingsTable = field(repr=False, compare=False)

    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def for_lanes(self, present: Collection[str]) -> SearchSpace:
        """This space for a study with the lanes `present`: a param that waits for lanes none
        of which is there is not searched (its setting stays at the server's default), nor is
        a param whose `when` that default does not meet."""
        waiting = [p for p in self.params if p.lanes and not set(p.lanes) & set(present)]
        fixed = {p.name: self.table.get(p.setting).default for p in waiting}
        rest = [p for p in self.params if p.name not in fixed]
        return replace(self, params=settled(rest, fixed, self.table))


class TrialLike(Protocol):
    """The part of `optuna.Trial` that `suggest` uses."""

    def suggest_int(
        self, name: str, low: int, high: int, *, log: bool = False, step: int = 1
    ) -> int: ...

    def suggest_float(self, name: str, low: float, high: float, *, log: bool = False) -> float: ...

    def suggest_categorical(self, name: str, choices: Any) -> Any: ...


def default_space_path(server: str) -> Path:
    """The shipped space for `server`: search_spaces/<server>.toml (`shipped_space`)."""
    return shipped_space(server)


# --- cpu expressions ----------------------------------------------------------------------


@lru_cache(maxsize=256)
def parse_expr(text: str) -> Callable[[int], int]:
    """Compile "4*cpus+1" into a function of cpus. Only integers, `cpus`, + - * // and
    parentheses are accepted (checked on the AST; nothing is ever eval'd)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"cannot parse {text!r}") from None

    def build(node: ast.AST) -> Callable[[int], int]:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            value = node.value
            return lambda cpus: value
        if isinstance(node, ast.Name) and node.id == "cpus":
            return lambda cpus: cpus
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            op, left, right = _OPS[type(node.op)], build(node.left), build(node.right)
            return lambda cpus: op(left(cpus), right(cpus))
        raise ValueError(f"{ast.unparse(node)!r} is not allowed in {text!r}")

    return build(tree.body)


def resolve_bound(bound: Bound, cpus: int) -> int | float:
    if isinstance(bound, str):
        return parse_expr(bound)(cpus)
    return bound


# --- loading ------------------------------------------------------------------------------


def load_space(path: Path, table: SettingsTable, server: str) -> SearchSpace:
    """Read and validate a search-space file for `server`; raise ConfigError naming the file."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read search space: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None

    extra = sorted(set(data) - {"server", "params"})
    if extra:
        raise ConfigError(f"{path}: unknown top-level key {extra[0]!r}; valid keys: params, server")
    if data.get("server") != server:
        raise ConfigError(
            f"{path}: server = {data.get('server')!r}; expected server = {server!r} "
            f"(this file is for another server, or the key is missing)"
        )
    raw_params = data.get("params")
    if not isinstance(raw_params, dict) or not raw_params:
        raise ConfigError(f"{path}: no [params.NAME] tables; declare at least one param")

    params: list[Param] = []
    settings_seen: dict[str, str] = {}
    for name, spec in raw_params.items():
        param = _load_param(path, name, spec, table)
        if param.setting in settings_seen:
            raise ConfigError(
                f"{path}: params.{name}: setting {param.setting!r} is already tuned by "
                f"params.{settings_seen[param.setting]}; each setting may appear once"
            )
        settings_seen[param.setting] = name
        params.append(param)

    params = _check_conditions(path, params, raw_params, table)
    return SearchSpace(server=server, params=tuple(params), source=str(path), table=table)


def _load_param(path: Path, name: str, spec: object, table: SettingsTable) -> Param:
    def fail(what: str) -> ConfigError:
        return ConfigError(f"{path}: params.{name}: {what}")

    if not isinstance(spec, dict):
        raise fail("expected a table [params.NAME]")
    given = spec.get("type")
    if given is not None and given not in TYPES:
        raise fail(f"type = {given!r}; valid types: {', '.join(TYPES)}")

    setting_name = spec.get("setting", name)
    if not isinstance(setting_name, str):
        raise fail(f"setting = {setting_name!r}; expected a setting name")
    try:
        setting = table.get(setting_name)
    except ConfigError as exc:
        raise fail(str(exc)) from None

    param_type = given or _inferred_type(spec, setting)
    if setting.kind not in _FITS[param_type]:
        fitting = ", ".join(t for t in TYPES if setting.kind in _FITS[t])
        raise fail(
            f"type = {param_type!r} does not fit setting {setting_name!r}, whose kind is "
            f"{setting.kind}; valid types for it: {fitting} (or leave type out)"
        )
    allowed = _KEYS[param_type] | _COMMON_KEYS
    unknown = sorted(set(spec) - allowed)
    if unknown:
        why = "" if given else f" (from setting {setting_name!r}, whose kind is {setting.kind})"
        raise fail(
            f"key {unknown[0]!r} does not apply to type {param_type}{why}; valid keys: "
            + ", ".join(sorted(allowed))
        )

    doc = spec.get("doc", setting.doc)
    if not isinstance(doc, str):
        raise fail("doc must be a string")
    when = spec.get("when", {})
    if not isinstance(when, dict) or not all(_condition_form(v) for v in when.values()):
        raise fail(
            "when must be a table {PARAM = [values, ...]} with non-empty lists, or "
            "{PARAM = { min = N }} for a numeric param"
        )

    lanes = spec.get("lanes", [])
    named = isinstance(lanes, list) and all(lane in LANE_KINDS for lane in lanes)
    if not named or ("lanes" in spec and not lanes):
        raise fail(f"lanes = {lanes!r}; expected a non-empty list of: {', '.join(LANE_KINDS)}")
    common: dict[str, Any] = {
        "name": name,
        "setting": setting_name,
        "type": param_type,
        "doc": doc,
        "lanes": tuple(lanes),
    }
    # `when` values are coerced in _check_conditions, once every param is known.
    if param_type == "categorical":
        return Param(**common, choices=_load_choices(fail, spec, setting))
    if param_type == "bool":  # a bool setting (_FITS), which takes both
        return Param(**common, choices=(False, True))
    return _load_range(fail, common, spec, setting)


def _inferred_type(spec: Mapping[str, Any], setting: Setting) -> str:
    """A param without `type`: categorical if it lists choices (an int setting searched over
    [1, 5, 30]), else what its setting's kind searches as."""
    return "categorical" if "choices" in spec else _INFERRED[setting.kind]


def _coerce(fail: Callable[[str], ConfigError], setting: Setting, raw: object, what: str) -> Value:
    try:
        return setting.coerce(raw)
    except ConfigError as exc:
        raise fail(f"{what} is not a valid value: {exc}") from None


def _load_choices(
    fail: Callable[[str], ConfigError], spec: Mapping[str, Any], setting: Setting
) -> tuple[Value, ...]:
    if "choices" not in spec and setting.kind is SettingKind.CHOICE:
        return tuple(setting.choices)  # all of them, in the table's order
    if "choices" not in spec and setting.kind is SettingKind.BOOL:
        return (False, True)
    raw = spec.get("choices")
    if not isinstance(raw, list) or not raw:
        raise fail(
            f"categorical needs choices = [...] with at least one value (only a choice or "
            f"bool setting's may be left out; {setting.name!r}'s kind is {setting.kind})"
        )
    choices = tuple(_coerce(fail, setting, c, f"choice {c!r}") for c in raw)
    if len(set(choices)) != len(choices):
        raise fail(f"choices {raw!r} repeat a value; list each value once")
    return choices


def _load_range(
    fail: Callable[[str], ConfigError],
    common: dict[str, Any],
    spec: Mapping[str, Any],
    setting: Setting,
) -> Param:
    kind = common["type"]
    given: dict[str, Bound] = {}
    for key in ("low", "high"):
        raw = spec.get(key)
        if isinstance(raw, str):
            try:
                parse_expr(raw)
            except ValueError as exc:
                raise fail(
                    f"{key} = {raw!r}: {exc}; use integers, cpus, + - * // and parentheses"
                ) from None
        elif isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise fail(f"{key} = {raw!r}; expected a number or an expression in cpus")
        elif kind == "int" and isinstance(raw, float):
            raise fail(f"{key} = {raw!r}; type int needs an integer")
        given[key] = raw
    log, step = spec.get("log", False), spec.get("step", 1)
    if not isinstance(log, bool):
        raise fail(f"log = {log!r}; expected true or false")
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise fail(f"step = {step!r}; expected an integer >= 1")
    if log and step != 1:
        raise fail("log = true cannot be combined with step; use one of them")
    param = Param(**common, low=given["low"], high=given["high"], log=log, step=step)

    # Every machine size must give a non-empty range that the setting accepts.
    for cpus in range(1, _MAX_CHECKED_CPUS + 1):
        try:
            low, high = _range(param, cpus)
        except ValueError as exc:
            raise fail(f"{exc}; give bounds valid for any CPU count") from None
        for key, value in (("low", low), ("high", high)):
            # A float param draws floats, so its bounds must pass as floats too.
            value = float(value) if kind == "float" else value
            _coerce(fail, setting, value, f"{key} = {value!r} (cpus={cpus})")
    return param


def _range(param: Param, cpus: int) -> tuple[int | float, int | float]:
    """Resolved (low, high) on a machine with `cpus` CPUs; ValueError if the range is unusable."""
    assert param.low is not None and param.high is not None
    try:
        low, high = resolve_bound(param.low, cpus), resolve_bound(param.high, cpus)
    except ZeroDivisionError:
        raise ValueError(f"division by zero at cpus={cpus}") from None
    if low > high:
        raise ValueError(f"low {low} > high {high} at cpus={cpus}")
    if param.log and low <= 0:
        raise ValueError(f"log scale needs low > 0, got {low} at cpus={cpus}")
    return low, high


def _check_conditions(
    path: Path, params: list[Param], raw_params: Mapping[str, Any], table: SettingsTable
) -> list[Param]:
    """Params with coerced `when` values; rejects unknown, later-declared or cyclic references."""
    position = {p.name: i for i, p in enumerate(params)}
    checked: list[Param] = []
    for i, param in enumerate(params):
        coerced: dict[str, tuple[Value, ...]] = {}
        least: dict[str, float] = {}
        for other, values in raw_params[param.name].get("when", {}).items():
            where = f"{path}: params.{param.name}: when.{other}"
            if other not in position:
                raise ConfigError(
                    f"{where}: no such param; declared params: " + ", ".join(position)
                )
            if other == param.name:
                raise ConfigError(f"{where}: a param cannot depend on itself (cycle)")
            if position[other] > i:
                if _reaches(raw_params, other, param.name):
                    raise ConfigError(
                        f"{where}: cycle {param.name} -> {other} -> "
                        f"{param.name}; conditions must form a chain"
                    )
                raise ConfigError(
                    f"{where}: params.{other} is declared later; declare it "
                    f"before params.{param.name} (params are sampled in order)"
                )
            target = params[position[other]]
            if isinstance(values, dict):
                least[other] = _condition_min(where, target, values)
                continue
            conditional = bool(raw_params[other].get("when"))
            coerced[other] = tuple(
                _condition_value(where, target, conditional, v, table) for v in values
            )
        checked.append(replace(param, when=coerced, when_min=least))
    return checked


def _condition_form(value: object) -> bool:
    if isinstance(value, dict):
        return set(value) == {"min"}
    return isinstance(value, list) and bool(value)


def _condition_min(where: str, target: Param, spec: Mapping[str, object]) -> float:
    """`{ min = N }`: a numeric range param's least value that enables the condition (e.g.
    uvicorn's recycling needs its supervisor, which only runs with 2 workers or more)."""
    least = spec["min"]
    if target.type not in ("int", "float"):
        raise ConfigError(
            f"{where}: {{ min = ... }} needs an int or float param; params.{target.name} "
            f"is {target.type} (list its values instead)"
        )
    if isinstance(least, bool) or not isinstance(least, int | float):
        raise ConfigError(f"{where}: min = {least!r} is not a number")
    return float(least)


def _reaches(raw_params: Mapping[str, Any], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name == goal:
            return True
        if name in seen or name not in raw_params:
            continue
        seen.add(name)
        todo += list(raw_params[name].get("when", {}))
    return False


def _condition_value(
    where: str, target: Param, conditional: bool, raw: object, table: SettingsTable
) -> Value:
    setting = table.get(target.setting)
    try:
        value = setting.coerce(raw)
    except ConfigError as exc:
        raise ConfigError(
            f"{where}: {raw!r} is not a value of params.{target.name}: {exc}"
        ) from None
    # A skipped param sits at the server default, so that value is reachable too.
    reachable = set(target.choices) | ({setting.default} if conditional else set())
    if target.choices and value not in reachable:
        raise ConfigError(
            f"{where}: {raw!r} can never be drawn; valid values: "
            + ", ".join(repr(v) for v in sorted(reachable, key=str))
        )
    return value


# --- sampling -----------------------------------------------------------------------------


def settled(
    params: Sequence[Param], fixed: Mapping[str, Value | None], table: SettingsTable
) -> tuple[Param, ...]:
    """`params` with their conditions on the params that are not searched (`fixed`, at the
    values they have there) settled: a condition that holds is dropped; a param whose
    condition cannot hold is left out, and its setting's default holds for those after it."""
    in_effect = dict(fixed)
    kept = []
    for param in params:
        if not _holds_for(param, in_effect):
            in_effect[param.name] = table.get(param.setting).default
            continue
        kept.append(_without_conditions_on(param, in_effect))
    return tuple(kept)


def _holds_for(param: Param, fixed: Mapping[str, Value | None]) -> bool:
    """Whether `param`'s conditions on the params in `fixed` hold at their values there."""
    known = {name: value for name, value in fixed.items() if name in param.when}
    least = {name: value for name, value in fixed.items() if name in param.when_min}
    return all(value in param.when[name] for name, value in known.items()) and all(
        _at_least(value, param.when_min[name]) for name, value in least.items()
    )


def _without_conditions_on(param: Param, fixed: Mapping[str, Value | None]) -> Param:
    """`param` without its conditions on the params in `fixed` (which hold: `_holds_for`)."""
    return replace(
        param,
        when={k: v for k, v in param.when.items() if k not in fixed},
        when_min={k: v for k, v in param.when_min.items() if k not in fixed},
    )


def active(param: Param, current: Mapping[str, Value | None]) -> bool:
    """Whether `param`'s conditions hold, given the current value of every earlier param."""
    return all(current.get(other) in values for other, values in param.when.items()) and all(
        _at_least(current.get(other), least) for other, least in param.when_min.items()
    )


def _at_least(value: Value | None, least: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= least


def suggest(
    space: SearchSpace,
    trial: TrialLike,
    cpus: int,
    fixed: Mapping[str, Value] | None = None,
) -> dict[str, Value]:
    """Sample one config (define-by-run): {setting: coerced value} for the params drawn.

    Params are walked in file order; one whose `when` does not hold is skipped and left at
    the server default. `fixed` ({setting: value}, e.g. from --set) pins settings: those are
    not sampled, are absent from the result, and conditions see the pinned value.
    """
    fixed = fixed or {}
    current: dict[str, Value] = {}  # param name -> value in effect (sampled, fixed or default)
    chosen: dict[str, Value] = {}
    for param in space.params:
        setting = space.table.get(param.setting)
        if param.setting in fixed:
            current[param.name] = setting.coerce(fixed[param.setting])
            continue
        if not active(param, current):
            current[param.name] = setting.default
            continue
        value = setting.coerce(_draw(param, trial, cpus, space.source))
        current[param.name] = chosen[param.setting] = value
    return chosen


def _draw(param: Param, trial: TrialLike, cpus: int, source: str) -> object:
    if param.type in ("categorical", "bool"):
        return trial.suggest_categorical(param.name, list(param.choices))
    try:
        low, high = _range(param, cpus)
    except ValueError as exc:
        raise ConfigError(f"{source}: params.{param.name}: {exc}") from None
    if param.type == "int":
        return trial.suggest_int(param.name, int(low), int(high), log=param.log, step=param.step)
    return trial.suggest_float(param.name, float(low), float(high), log=param.log)


def admits(param: Param, value: Value, cpus: int) -> bool:
    """Whether `param` can take `value` on a machine with `cpus` CPUs (a choice, or inside its
    range); False for a range that does not resolve there."""
    if param.type in ("categorical", "bool"):
        return value in param.choices
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        low, high = _range(param, cpus)
    except ValueError:
        return False
    return low <= value <= high


def bounds(space: SearchSpace, cpus: int) -> dict[str, tuple[Any, ...]]:
    """Each param's resolved range (low, high) or its choices, for display and docs."""
    out: dict[str, tuple[Any, ...]] = {}
    for param in space.params:
        if param.type in ("categorical", "bool"):
            out[param.name] = param.choices
        else:
            try:
                out[param.name] = _range(param, cpus)
            except ValueError as exc:
                raise ConfigError(f"{space.source}: params.{param.name}: {exc}") from None
    return out


def extend_space(
    space: SearchSpace, table: SettingsTable, raw_params: Mapping[str, Any], source: str
) -> SearchSpace:
    """`space` plus params declared elsewhere (an app's own settings, tuner/appsettings.py),
    checked against `table`: the server's settings and the app's. Such params have no `when`
    (an app setting applies whatever the server runs) and are sampled after the server's."""
    params = list(space.params)
    taken = {p.name for p in params} | {p.setting for p in params}
    for name, spec in raw_params.items():
        try:
            param = _load_param(Path(source), name, spec, table)
        except ConfigError as exc:  # named as the app's file names it
            text = str(exc).replace(f"params.{name}:", f"settings.{name}.search:")
            raise ConfigError(text) from None
        if param.name in taken or param.setting in taken:
            raise ConfigError(f"{source}: {name}: the server's search space tunes it already")
        params.append(param)
    return replace(space, params=tuple(params), table=table)
