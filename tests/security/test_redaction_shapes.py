"""Hole 7: redaction covers credential shapes by class, not by example.

Keys in other languages and notations, values in quotes or brackets, command-line flags, YAML / INI /
XML / env-file forms, connection strings, cookies, vendor token prefixes, a key followed by whitespace,
and a secret column renamed with `AS`. Ordinary text (the bundled demo runbooks, log and database
fixture, prose about passwords) comes out unchanged, and the cost stays linear in the input.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import tools
from tests.support.mysql import MysqlTestEnv, mysql_request
from tools.adapter import ToolError
from tools.redaction import NOOP, REDACTED, Redactor

R = REDACTED
SHAPES = [
    # keys in other languages, full-width separators
    ("密码=hunter2", f"密码={R}"),
    ("登录密码：Abc12345", f"登录密码：{R}"),
    ("数据库口令: p@ss", f"数据库口令: {R}"),
    ("パスワード: x9y8z7", f"パスワード: {R}"),
    ("비밀번호=qwerty1", f"비밀번호={R}"),
    ("Passwort: geheim123", f"Passwort: {R}"),
    ("пароль=qwerty1", f"пароль={R}"),
    ("contraseña: s3cr3t", f"contraseña: {R}"),
    # values in quotes or brackets
    ("password=[hunter2]", f"password=[{R}]"),
    ("password: (hunter2)", f"password: ({R})"),
    ("password=<hunter2>", f"password=<{R}>"),
    ("password=`hunter2`", f"password=`{R}`"),
    ("密码：「hunter2」", f"密码：「{R}」"),
    # command-line flags
    ("mysql -uroot -phunter2 shop", f"mysql -uroot -p{R} shop"),
    ("mysqldump -h db -u app -p'p@ss w0rd' shop", f"mysqldump -h db -u app -p{R} shop"),
    ("app --password hunter2 --verbose", f"app --password {R} --verbose"),
    ("deploy --token=abc123 --dry-run", f"deploy --token={R} --dry-run"),
    ("cli --api-key 'k e y' run", f"cli --api-key {R} run"),
    # YAML, INI, env files, XML
    ("  password: hunter2", f"  password: {R}"),
    ("password = hunter2", f"password = {R}"),
    ('export DB_PASSWORD="hunter2"', f'export DB_PASSWORD="{R}"'),
    ("<password>hunter2</password>", f"<password>{R}</password>"),
    ("<db:adminPassword>hunter2</db:adminPassword>", f"<db:adminPassword>{R}</db:adminPassword>"),
    ('<add key="DbPassword" value="hunter2" />', f'<add key="DbPassword" value="{R}" />'),
    # connection strings
    (
        "Server=db;User ID=sa;Password=p@ss word;Encrypt=true",
        f"Server=db;User ID=sa;Password={R};Encrypt=true",
    ),
    (
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=abc+/def==;EndpointSuffix=core.windows.net",
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={R};EndpointSuffix=core.windows.net",
    ),
    (
        "https://a.blob.core.windows.net/c?sv=2020-08-04&sig=abcDEF%2B%3D&se=2026",
        f"https://a.blob.core.windows.net/c?sv=2020-08-04&sig={R}&se=2026",
    ),
    # cookies
    ("Cookie: session=abc123; csrftoken=def456", f"Cookie: {R}"),
    ("Set-Cookie: sid=xyz789; HttpOnly; Secure", f"Set-Cookie: {R}"),
    ('{"cookie": "sid=xyz789"}', f'{{"cookie": "{R}"}}'),
    # vendor token prefixes
    ("glpat-" + "a1B2c3D4e5F6g7H8i9J0", R),
    ("npm_" + "a" * 18 + "B" * 18, R),
    ("pypi-AgEIcHlwaS5vcmc" + "x" * 60, R),
    ("xoxe-1-" + "a" * 20, R),
    ("xapp-1-A0123456789-1234567890123-abcdef", R),
    ("ya29." + "a0AfH6SMBx" * 3, R),
    ("GOCSPX-" + "a" * 28, R),
    ("hf_" + "a" * 34, R),
    ("SG." + "a" * 22 + "." + "b" * 43, R),
    ("shpat_" + "0123456789abcdef" * 2, R),
    ("dop_v1_" + "0123456789abcdef" * 4, R),
    ("sk-ant-api03-" + "x" * 40, R),
    ("ASIA" + "Y" * 16, R),
    # a secret key followed by whitespace
    ("password hunter2!", f"password {R}"),
    ("machine db login app password s3cr3t-X", f"machine db login app password {R}"),
    ("API_KEY  abc123def456", f"API_KEY  {R}"),
]

PROSE = [
    "password rotation is due",
    "检查 password 是否过期",
    "password login succeeded",
    "bearer token missing",
    "the token expired at 02:10",
    "客户轮换了 client secret 但未同步",
    "docker run -p 8080:80 nginx",
    "mysql connection pool exhausted (pool size 20)",
    "<title>Gateway 504</title>",
    "Cookie banner shown",
    "cache key-1234 evicted",
]


@pytest.mark.parametrize(("raw", "expected"), SHAPES)
def test_each_shape_is_redacted(raw: str, expected: str) -> None:
    assert NOOP.text(raw) == expected
    assert NOOP.text(expected) == expected  # idempotent


@pytest.mark.parametrize("raw", PROSE)
def test_prose_about_credentials_stays_readable(raw: str) -> None:
    assert NOOP.text(raw) == raw


DATA = Path(tools.__file__).resolve().parent / "data"


def test_no_false_positive_on_the_bundled_demo_data() -> None:
    """Every line of the demo runbooks, incident log and database fixture comes out unchanged."""
    lines = [
        line
        for path in sorted(DATA.rglob("*"))
        if path.is_file()
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    changed = [line for line in lines if NOOP.text(line) != line]
    assert len(lines) > 500
    assert changed == []
    for line in (DATA / "logs" / "demo.ndjson").read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        assert NOOP.value(entry) == entry


NEW_UNITS = [
    "密码 ",
    "<password>a</password>",
    "--password ",
    "mysql -p ",
    "Cookie: ",
    "key='x' value='",
    "sig=",
]


def _best_seconds(*texts: str) -> list[float]:
    """Best of 3 per text, measured in turns, so a busy machine slows every size alike. CPU time of
    this process (`process_time`), not wall time: waiting for a core on a loaded machine does not count."""
    redactor = Redactor(["some-configured-secret"])
    best = [float("inf")] * len(texts)
    for _ in range(3):
        for index, text in enumerate(texts):
            started = time.process_time()
            redactor.text(text)
            best[index] = min(best[index], time.process_time() - started)
    return best


@pytest.mark.parametrize("unit", NEW_UNITS)
def test_the_new_rules_cost_linear_time(unit: str) -> None:
    """A ratio of two input sizes measured side by side: 10x the input costs ~10x when linear and ~100x
    when quadratic; the bound sits between the two on a log scale (~3x of room either way), so a busy
    machine cannot tip a linear rule over it."""
    small = (unit * (100_000 // len(unit) + 1))[:100_000]
    large = (unit * (1_000_000 // len(unit) + 1))[:1_000_000]
    small_s, large_s = _best_seconds(small, large)
    ratio = large_s / max(small_s, 1e-6)
    assert ratio < 30, f"{ratio:.1f}x the time for 10x the input"


@pytest.mark.mysql
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT id, secret AS s FROM canary ORDER BY id",
        "SELECT id, CONCAT('x', secret) AS note FROM canary ORDER BY id",
        "SELECT * FROM (SELECT id, secret AS s FROM canary) AS d ORDER BY id",
        "WITH c AS (SELECT id, secret AS s FROM canary) SELECT id, s AS shown FROM c ORDER BY id",
    ],
)
async def test_a_secret_column_renamed_with_as_is_refused(mysql_env: MysqlTestEnv, sql: str) -> None:
    """It used to run with the renamed column hidden; reading a secret column anywhere is now refused
    before the server (tests/security/test_sql_secret_reads.py)."""
    adapter = mysql_env.adapter()
    try:
        with pytest.raises(ToolError) as refused:
            await adapter.execute(mysql_request(sql))
    finally:
        await adapter.aclose()
    assert (refused.value.code, refused.value.reason) == ("POLICY_REJECTED", "SECRET_COLUMN")
    assert adapter.pool_stats()["opened"] == 0
