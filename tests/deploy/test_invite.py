"""The invite URL carries exactly the documented permissions and scopes; intents are unprivileged."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import discord
import pytest

from animegamer.cli import main
from bot.invite import InviteError, client_id_from_token, invite_url
from bot.parts.permissions import PERMISSIONS, bot_intents, bot_permissions

README = Path(__file__).resolve().parents[2] / "README.md"
# The documented list (README, "Discord permissions and intents"), as discord.py flags.
DOCUMENTED = ("view_channel", "send_messages", "send_messages_in_threads", "embed_links", "attach_files",
              "read_message_history")


def test_permission_integer_matches_the_documented_list():
    expected = discord.Permissions.none()
    for flag in DOCUMENTED:
        setattr(expected, flag, True)
    query = parse_qs(urlsplit(invite_url(1234567890)).query)
    assert int(query["permissions"][0]) == expected.value == 274878024704
    assert query["scope"] == ["bot applications.commands"]
    assert query["client_id"] == ["1234567890"]
    assert {p.flag for p in PERMISSIONS} == set(DOCUMENTED)


def test_readme_documents_each_permission_and_nothing_else():
    text = README.read_text()
    section = text.split("### Discord permissions and intents", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (?:permission: )?([A-Z][\w ]+?) \|", section, re.M)
    assert set(rows) == {p.label for p in PERMISSIONS}
    assert f"integer {bot_permissions().value}" in section
    assert "Use External Emojis" in section  # documented as not requested, with why
    assert "Members" in section and "Message Content" in section


def test_intents_are_not_privileged():
    intents = bot_intents()
    assert intents.guilds
    assert not intents.members and not intents.presences and not intents.message_content


def test_client_id_from_token():
    token = base64.b64encode(b"112233445566778899").decode().rstrip("=") + ".GhIjKl.signature"
    assert client_id_from_token(token) == "112233445566778899"
    with pytest.raises(InviteError):
        client_id_from_token("garbage.token")
    with pytest.raises(InviteError):
        invite_url("abc")


def test_cli(capsys, monkeypatch):
    for k in ("ANIMEGAMER_DISCORD_TOKEN",):
        monkeypatch.delenv(k, raising=False)
    assert main(["invite-url", "--client-id", "42"]) == 0
    assert capsys.readouterr().out.strip() == invite_url(42)
    token = base64.b64encode(b"987654321").decode().rstrip("=") + ".x.y"
    monkeypatch.setenv("ANIMEGAMER_DISCORD_TOKEN", token)
    assert main(["invite-url"]) == 0
    assert "client_id=987654321" in capsys.readouterr().out
    monkeypatch.delenv("ANIMEGAMER_DISCORD_TOKEN")
    monkeypatch.chdir(Path(__file__).parent)  # no .env here
    assert main(["invite-url"]) == 2
    assert "--client-id" in capsys.readouterr().err
