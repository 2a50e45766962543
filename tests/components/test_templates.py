"""The composed exports parse back into the attributes they were built from, whatever the password holds."""

from __future__ import annotations

import pytest
import redis
from psycopg.conninfo import conninfo_to_dict

from components.templates import engine_template
from tools.engines.ports import PORTS

# Every character a URL gives a meaning to, and a percent sign.
AWKWARD = "p:@/?#%[] &+=x"


@pytest.mark.parametrize("kind", ["database", "user"])
def test_postgres_dsn_parses_back(kind):
    dsn = engine_template("postgres").kinds[kind].exports["dsn"].render(
        {"user": "shop_app", "password": AWKWARD, "host": "db.internal", "port": PORTS["postgres"], "database": "shop"})
    assert conninfo_to_dict(dsn) == {"user": "shop_app", "password": AWKWARD, "host": "db.internal",
                                     "port": str(PORTS["postgres"]), "dbname": "shop"}


def test_redis_acl_user_url_parses_back():
    url = engine_template("redis").kinds["acl_user"].exports["url"].render(
        {"user": "shop", "password": AWKWARD, "host": "cache.internal", "port": PORTS["redis"]})
    parsed = redis.connection.parse_url(url)
    assert (parsed["username"], parsed["password"], parsed["host"], parsed["port"]) == ("shop", AWKWARD, "cache.internal", PORTS["redis"])
