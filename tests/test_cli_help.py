"""Every `hpt` subcommand has a useful --help (it exits 0 and describes its arguments)."""

from __future__ import annotations

import pytest

from orchestrator.cli import build_parser, main


def _subcommands() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sorted(sub.choices)


def test_top_level_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in ("trial", "run", "rerun", "status", "submit", "validate", "schema", "analyze", "report",
                 "coordcheck", "data"):
        assert name in out


@pytest.mark.parametrize("name", _subcommands())
def test_subcommand_help(name, capsys):
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: hpt " + name) and len(out.splitlines()) >= 4
