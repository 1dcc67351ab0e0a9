"""``chazbot tool`` runs the reminder tools (#37) as it runs the memory tools: the same checks
of the arguments, with the operator's rights (no cap, every room's reminders), through the
command line on a real state directory."""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_cli import chazbot, write_config


def test_the_reminder_tools_through_chazbot_tool(tmp_path: Path) -> None:
    write_config(tmp_path, timezone="Europe/Berlin")
    listed = chazbot("tool", "list_schedules", "{}", cwd=tmp_path)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "there is no tool" not in listed.stdout.lower()
    assert "not allowed" not in listed.stdout, listed.stdout
    once = chazbot(
        "tool",
        "schedule_once",
        json.dumps({"when": "tomorrow at 9", "what": "call Ines"}),
        cwd=tmp_path,
    )
    assert once.returncode == 0 and once.stdout.startswith("Set r"), once.stdout + once.stderr
    assert "(Europe/Berlin)" in once.stdout, once.stdout  # read in the configured zone
    rid = once.stdout.split()[1].rstrip(".")
    every = chazbot(
        "tool",
        "schedule_every",
        json.dumps({"frequency": "weekly", "time": "09:00", "weekday": "sunday", "what": "bins"}),
        cwd=tmp_path,
    )
    assert every.returncode == 0 and every.stdout.startswith("Set r"), every.stdout
    listed = chazbot("tool", "list_schedules", "{}", cwd=tmp_path)
    assert "call Ines" in listed.stdout and "bins" in listed.stdout, listed.stdout
    # the same checks as for a model (each case in tests/reminders/test_reminders_tools.py): bad
    # input is one line, exit 1, nothing written
    bad = chazbot(
        "tool", "schedule_once", '{"when": "yesterday at 9", "what": "past"}', cwd=tmp_path
    )
    assert bad.returncode == 1 and bad.stdout.startswith("Error:"), bad.stdout
    assert len(bad.stdout.strip().splitlines()) == 1, bad.stdout
    bad = chazbot("tool", "schedule_once", "not json", cwd=tmp_path)
    assert bad.returncode == 1 and "not valid JSON" in bad.stdout
    cancelled = chazbot("tool", "cancel_schedule", json.dumps({"id": rid}), cwd=tmp_path)
    assert cancelled.returncode == 0 and cancelled.stdout.startswith("Cancelled"), cancelled.stdout
    listed = chazbot("tool", "list_schedules", "{}", cwd=tmp_path)
    assert "call Ines" not in listed.stdout and "past" not in listed.stdout, listed.stdout
    assert "bins" in listed.stdout, listed.stdout
    # an unknown tool is still refused
    none = chazbot("tool", "schedule_never", "{}", cwd=tmp_path)
    assert none.returncode == 1, none.stdout
