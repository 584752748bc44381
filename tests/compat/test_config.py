"""flux-core's ``Configuration.get().settings`` mapped onto this engine's settings: each
key read as ``flux start`` reads it (variable, then flux.toml, then default); what has no
counterpart, writes and ``override()`` raise, naming the key and the guide."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from flux.config import Configuration


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    for name in (
        "FLUX_HOME",
        "FLUX_PORT",
        "FLUX_DATABASE_URL",
        "FLUX_SERVER_URL",
        "FLUX_LABELS",
        "FLUX_OUTPUT_STORAGE_DIR",
        "FLUX_CONFIG",
        "FLUX_DEBUG",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    Configuration.get().reset()
    yield Configuration.get()
    Configuration.get().reset()


def test_the_variables_flux_start_reads_are_the_settings(fresh, monkeypatch, tmp_path):
    monkeypatch.setenv("FLUX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FLUX_SERVER_URL", "http://flux:9000")
    monkeypatch.setenv("FLUX_LABELS", "gpu=a100 region=eu")
    monkeypatch.setenv("FLUX_OUTPUT_STORAGE_DIR", str(tmp_path / "out"))
    settings = fresh.settings
    assert settings.home == str(tmp_path / "home")
    assert settings.database_url == f"sqlite:///{tmp_path / 'home' / 'flux.db'}"
    assert settings.workers.server_url == "http://flux:9000"
    assert settings.workers.labels == {"gpu": "a100", "region": "eu"}
    assert settings.local_storage_path == str(tmp_path / "out")
    assert Configuration() is fresh and fresh.settings is settings


def test_flux_toml_under_the_variables_then_the_defaults(fresh, monkeypatch, tmp_path):
    (tmp_path / "flux.toml").write_text(
        '[server]\nport = 9100\n[client]\nserver_url = "http://c:1"\n[worker]\nlabels = { zone = "b" }\n'
    )
    assert (fresh.settings.server_port, fresh.settings.workers.server_url) == (9100, "http://c:1")
    assert fresh.settings.workers.labels == {"zone": "b"} and fresh.settings.server_host == "127.0.0.1"
    monkeypatch.setenv("FLUX_PORT", "9200")
    fresh.reload()
    assert fresh.settings.server_port == 9200


def test_what_has_no_counterpart_writes_and_override_raise_naming_it(fresh):
    with pytest.raises(
        AttributeError, match=r"settings\.security has no counterpart.*FLUX_SECRETS_KEY.*migrating-from-flux-core"
    ):
        fresh.settings.security
    with pytest.raises(AttributeError, match=r"settings\.encryption_key has no counterpart"):
        fresh.settings.encryption_key
    with pytest.raises(FrozenInstanceError):
        fresh.settings.home = "/elsewhere"
    with pytest.raises(AttributeError, match=r"override\(database_url\) is refused"):
        fresh.override(database_url="sqlite:///x.db")
