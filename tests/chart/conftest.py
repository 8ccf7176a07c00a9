from __future__ import annotations

import pytest
from helmchart import Helm, install_helm


@pytest.fixture(scope="session")
def helm() -> Helm:
    try:
        return Helm(install_helm())
    except Exception as error:  # a missing helm must fail the suite, never skip it
        pytest.fail(f"cannot get a helm binary: {error}", pytrace=False)
