"""Fixtures of the LocalStack kinds' tests, against moto in server mode."""

from __future__ import annotations

import pytest

from tests.providers.s3.contract import AWS_ENDPOINT, require_server


@pytest.fixture(scope="module", autouse=True)
def moto_running():
    require_server(AWS_ENDPOINT + "/", "moto (instance 'aws')", "localstack")


@pytest.fixture
def provider_for(configure):
    return lambda cls: configure(cls())
