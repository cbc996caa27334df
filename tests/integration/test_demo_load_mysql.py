"""`diagnose demo load-mysql` writes only through an admin account of its own, never through the
read-only `[mysql]` evidence account, on the real MariaDB with the README's grants.
(docs/query-mysql.md, "The demo database")
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from console.commands.demo import ADMIN_NEEDED
from console.commands.main import main
from tests.support.mysql import MYSQL_HOST, MYSQL_PORT, MysqlTestEnv
from tests.support.resilience import write_config

pytestmark = pytest.mark.mysql


def tables(env: MysqlTestEnv, database: str) -> list[str]:
    rows = env.admin(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1", (database,)
    )
    return [row[0] for row in rows]


def test_load_mysql_writes_through_its_admin_account_never_the_evidence_one(
    mysql_env: MysqlTestEnv,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    demo = f"{mysql_env.prefix}_demo"
    mysql_env.extra_databases.append(demo)
    mysql_env.admin(f"CREATE DATABASE `{demo}` CHARACTER SET utf8mb4")
    # The accounts of docs/query-mysql.md: the evidence account reads, the demo admin may create the tables.
    reader_password, admin_password = secrets.token_hex(8), secrets.token_hex(8)
    reader = mysql_env.create_user(reader_password, [f"GRANT SELECT, SHOW VIEW ON `{demo}`.* TO {{user}}"])
    admin = mysql_env.create_user(
        admin_password, [f"GRANT CREATE, DROP, INSERT, SELECT ON `{demo}`.* TO {{user}}"]
    )
    monkeypatch.setenv("DEMO_READER_PASSWORD", reader_password)
    monkeypatch.setenv("DEMO_ADMIN_PASSWORD", admin_password)
    server = f"{MYSQL_HOST}:{MYSQL_PORT}"
    config = write_config(
        tmp_path / "diagnose.toml",
        {"mysql": {"dsn": f"mysql://{reader}@{server}/{demo}", "password_env": "DEMO_READER_PASSWORD"}},
    )
    load = ["demo", "load-mysql", "--config", str(config)]

    # Without an admin account: refused before any connection, saying what it needs.
    assert main(load) == 3
    assert capsys.readouterr().err == f"diagnose: {ADMIN_NEEDED}\n"
    # The evidence account, or its password variable, as the admin: refused too.
    as_reader = ["--admin-dsn", f"mysql://{reader}@localhost:{MYSQL_PORT}/{demo}"]
    assert main([*load, *as_reader, "--admin-password-env", "DEMO_ADMIN_PASSWORD"]) == 3
    assert f"names the [mysql] evidence account '{reader}'" in capsys.readouterr().err
    as_admin = ["--admin-dsn", f"mysql://{admin}@{server}/{demo}"]
    assert main([*load, *as_admin, "--admin-password-env", "DEMO_READER_PASSWORD"]) == 3
    assert "names the [mysql] password variable" in capsys.readouterr().err
    # A password on the command line: refused (other local users can read it).
    inline = ["--admin-dsn", f"mysql://{admin}:{admin_password}@{server}/{demo}"]
    assert main([*load, *inline]) == 3
    assert "must not carry a password" in capsys.readouterr().err
    assert tables(mysql_env, demo) == []

    # Through the admin account: loaded, and the evidence account is told its grant.
    assert main([*load, *as_admin, "--admin-password-env", "DEMO_ADMIN_PASSWORD"]) == 0
    out = capsys.readouterr().out
    assert f"as '{admin}'" in out
    assert f"GRANT SELECT, SHOW VIEW ON `{demo}`.* TO '{reader}'@'%';" in out
    assert admin_password not in out
    assert reader_password not in out
    assert "orders" in tables(mysql_env, demo)

    # The built-in scenario reads it through the read-only account.
    audit = tmp_path / "audit.db"
    run = ["run", "--scenario", "mysql-stuck-enterprise-orders", "--config", str(config), "--json"]
    assert main([*run, "--audit-db", str(audit)]) == 0
    assert json.loads(capsys.readouterr().out)["outcome"] == "DRAFT"


def test_an_admin_account_without_write_grants_fails_in_one_line(
    mysql_env: MysqlTestEnv, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An account that may only read (as `[mysql]`'s is, and what the old command wrote through) gets
    the server's refusal as one line, exit 1, and nothing is created."""
    demo = f"{mysql_env.prefix}_demo2"
    mysql_env.extra_databases.append(demo)
    mysql_env.admin(f"CREATE DATABASE `{demo}`")
    reader = mysql_env.create_user("", [f"GRANT SELECT, SHOW VIEW ON `{demo}`.* TO {{user}}"])
    config = write_config(
        tmp_path / "diagnose.toml", {"mysql": {"dsn": f"mysql://root@{MYSQL_HOST}:{MYSQL_PORT}/x"}}
    )
    # Loading as the reader (any account but [mysql]'s is let through): the server refuses, one line.
    dsn = f"mysql://{reader}@{MYSQL_HOST}:{MYSQL_PORT}/{demo}"
    assert main(["demo", "load-mysql", "--config", str(config), "--admin-dsn", dsn]) == 1
    err = capsys.readouterr().err
    assert err.startswith("diagnose: loading the demo database failed: ")
    assert err.count("\n") == 1
    assert "denied" in err
    assert "Traceback" not in err
    assert tables(mysql_env, demo) == []
