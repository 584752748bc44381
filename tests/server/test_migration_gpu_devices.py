"""0022: worker_resources_gpus gains the device columns (issue 36), up and down."""

import pytest
from test_migrations import alembic, columns, schema_diff

from flux.server.database import migrate

DEVICE_COLUMNS = {"compute_capability", "mig", "mig_profile", "parent", "unhealthy"}


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_gpu_devices_migration_goes_up_and_down(backend, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'gpus.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    migrate(url)
    assert DEVICE_COLUMNS <= columns(url, "worker_resources_gpus")
    alembic(url).downgrade("0018")
    assert not DEVICE_COLUMNS & columns(url, "worker_resources_gpus")
    migrate(url)
    assert schema_diff(url) == []
