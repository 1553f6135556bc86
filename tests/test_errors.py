"""Every error envguard raises is an :class:`EnvguardError` of its concern, and the one
boundary (:func:`envguard._entry.errors`) says each as one line with its exit code."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from collections.abc import Iterator

import pytest

import envguard
from envguard import _entry, errors
from envguard.errors import EnvguardError, NotRestored

# exceptions that signal inside their module and are caught there: never the user's
SIGNALS = {
    "envguard._toml._Unsupported",  # tomli-w writes what the fast writer cannot
    "envguard.bisect.search._Exhausted",  # the search ran out of trials
    "envguard.bisect.trials.Unbuildable",  # a trial that cannot be built is its verdict
}


def _modules() -> Iterator[str]:
    yield "envguard"
    for info in pkgutil.walk_packages(envguard.__path__, "envguard."):
        yield info.name


def _exceptions() -> list[type[BaseException]]:
    """Every exception class defined in envguard's modules."""
    found = []
    for name in _modules():
        module = importlib.import_module(name)
        found += [
            cls for cls in vars(module).values()
            if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == name
        ]  # fmt: skip
    return found


EXCEPTIONS = _exceptions()
ERRORS = [cls for cls in EXCEPTIONS if issubclass(cls, EnvguardError)]


def _name(cls: type[BaseException]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_every_error_is_an_envguard_error() -> None:
    others = {_name(cls) for cls in EXCEPTIONS if not issubclass(cls, EnvguardError)}
    assert others == SIGNALS, "an error the boundary would call an internal error"


def test_the_concerns_live_in_errors_py() -> None:
    """One module names every concern; the others raise them (a module's own error is
    only one that belongs to it alone: a failed demo act, drift that guard() stops on)."""
    elsewhere = {_name(cls) for cls in ERRORS if cls.__module__ != "envguard.errors"}
    assert elsewhere == {"envguard.demo.acts.ActFailed", "envguard.runtime_guard.DriftError"}
    from envguard import tools, uv

    assert (uv.UvError, tools.ToolError) == (errors.UvError, errors.ToolError)  # moved there


def test_exit_codes_are_two_but_for_not_restored_and_a_failed_demo() -> None:
    codes = {_name(cls): cls.exit_code for cls in ERRORS if cls.exit_code != 2}
    assert codes == {"envguard.errors.NotRestored": 1, "envguard.demo.acts.ActFailed": 1}


@pytest.mark.parametrize("cls", ERRORS, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("as_json", [False, True], ids=["human", "json"])
def test_the_boundary_says_each_in_one_line_with_its_code(
    cls: type[EnvguardError], as_json: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    _entry.UI.command, _entry.UI.as_json = "restore", as_json
    try:
        with pytest.raises(SystemExit) as stopped, _entry.errors():
            raise cls("the lock's\nsecond line")
    finally:
        _entry.UI.command, _entry.UI.as_json = "", False
    out, err = capsys.readouterr()
    said = "not restored: " if issubclass(cls, NotRestored) else ""
    assert stopped.value.code == cls.exit_code
    assert err == f"error: {said}the lock's second line\n"
    if as_json:
        doc = json.loads(out)
        assert (doc["kind"], doc["exit_code"], doc["result"]) == ("restore", cls.exit_code, None)
        assert doc["error"] == f"{said}the lock's\nsecond line"
    else:
        assert out == ""
