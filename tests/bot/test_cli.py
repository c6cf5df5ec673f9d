"""`animegamer bot` refuses to start without a token, saying which setting to set."""

from __future__ import annotations

from animegamer.cli import main


def test_bot_needs_a_token(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)  # no .env or animegamer.toml here
    monkeypatch.delenv("ANIMEGAMER_DISCORD_TOKEN", raising=False)
    assert main(["bot"]) == 2
    assert "ANIMEGAMER_DISCORD_TOKEN" in capsys.readouterr().err
