"""Settings come from the environment, .env and TOML; bad ones fail naming the setting."""

from __future__ import annotations

import pytest

from game.catalogue import load_checked_settings as load_settings
from settings import SettingsError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    import os

    for k in list(os.environ):
        if k.startswith("ANIMEGAMER_") or k == "DATABASE_URL":
            monkeypatch.delenv(k)
    monkeypatch.chdir(tmp_path)


def test_defaults_use_embedded_database(monkeypatch, tmp_path):
    s = load_settings()
    assert s.database_url is None
    assert s.backend == "preview"
    assert s.model_root == s.data_dir / "models"


def test_prefixed_environment_and_plain_database_url(monkeypatch):
    monkeypatch.setenv("ANIMEGAMER_BACKLOG_CAP", "7")
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@h/db")
    s = load_settings()
    assert s.backlog_cap == 7
    assert s.database_url == "postgresql://u@h/db"


def test_toml_file_and_env_precedence(monkeypatch, tmp_path):
    cfg = tmp_path / "conf.toml"
    cfg.write_text('cooldown_seconds = 3.5\nbacklog_cap = 9\ndefault_film = "ponyo"\n')
    monkeypatch.setenv("ANIMEGAMER_CONFIG", str(cfg))
    monkeypatch.setenv("ANIMEGAMER_BACKLOG_CAP", "4")
    s = load_settings()
    assert (s.cooldown_seconds, s.backlog_cap, s.default_film) == (3.5, 4, "ponyo")


def test_dotenv(tmp_path):
    (tmp_path / ".env").write_text("ANIMEGAMER_HISTORY_WINDOW=3\n")
    assert load_settings().history_window == 3


@pytest.mark.parametrize(
    ("var", "value", "named"),
    [
        ("ANIMEGAMER_BACKLOG_CAP", "lots", "ANIMEGAMER_BACKLOG_CAP"),
        ("ANIMEGAMER_BACKEND", "magic", "ANIMEGAMER_BACKEND"),
        ("DATABASE_URL", "mysql://x/y", "ANIMEGAMER_DATABASE_URL or DATABASE_URL"),
        ("ANIMEGAMER_DEFAULT_FILM", "totoro", "ANIMEGAMER_DEFAULT_FILM"),
        ("ANIMEGAMER_HISTORY_WINDOW", "9", "ANIMEGAMER_HISTORY_WINDOW"),
    ],
)
def test_invalid_settings_name_the_setting(monkeypatch, var, value, named):
    monkeypatch.setenv(var, value)
    with pytest.raises(SettingsError) as ei:
        load_settings()
    assert named in str(ei.value)


def test_missing_config_file_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("ANIMEGAMER_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings()
