"""The redaction corpus: credential shapes that must never survive, and ordinary log lines that must.

`SHAPES` are the classes operators paste into queries and backends echo into logs and rows: each shape
of issue 20 (PGP private key blocks, Twilio, Vault, webhook secrets, a DSN password with `/`,
`auth_key=`, `db_pass=`, `secret_key_base:`, `creds`, a Docker config `"auth"`, `curl -u`, a password's
tail after `&` or `,`, Traditional Chinese and Korean labels) and the usual issuer tokens. Every token
is made up: right length and alphabet for its issuer, never a real credential. `secrets` lists what
must not appear in any output (a shape's whole value and, where a rule could stop early, its tail).

`ORDINARY` (tests/data/ordinary_log_lines.txt) are lines an investigation needs to read as they are:
request IDs, UUIDs, commit hashes, digests, order numbers, MySQL's `(using password: YES)`,
`password: incorrect`, `token: expired`, paths containing `passwd`, prose about credentials, and the
tool's own messages.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from pathlib import Path

ORDINARY_FILE = Path(__file__).resolve().parents[1] / "data" / "ordinary_log_lines.txt"

_random = random.Random(20)  # the same made-up tokens on every run
ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B32 = string.ascii_uppercase + "234567"
URLSAFE = ALNUM + "_-"


def made_up(alphabet: str, length: int) -> str:
    return "".join(_random.choice(alphabet) for _ in range(length))


@dataclass(frozen=True)
class Shape:
    name: str
    text: str
    secrets: tuple[str, ...]


def _shape(name: str, text: str, *secrets: str) -> Shape:
    return Shape(name, text, secrets)


_PGP_BODY = [made_up(ALNUM + "+/", 64) for _ in range(4)]
_RSA_BODY = [made_up(ALNUM + "+/", 64) for _ in range(3)]
_OPENSSH_BODY = [made_up(ALNUM + "+/", 70) for _ in range(3)]
_SSH2_BODY = [made_up(ALNUM + "+/", 64) for _ in range(2)]
_JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJ" + made_up(URLSAFE, 40) + "." + made_up(URLSAFE, 43)
_BASIC = made_up(ALNUM, 24) + "=="
_DOCKER_AUTH = made_up(ALNUM, 28) + "=="


def _token(name: str, template: str, token: str) -> Shape:
    """An issuer token inside a line: the token is the secret."""
    return Shape(name, template.format(token), (token,))


SHAPES: list[Shape] = [
    # --- the shapes issue 20 names -------------------------------------------------------------------
    _shape(
        "pgp-private-key-block",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n" + "\n".join(_PGP_BODY) + "\n=Xq7T\n"
        "-----END PGP PRIVATE KEY BLOCK-----",
        *_PGP_BODY,
    ),
    _token("twilio-api-key", "twilio: using key {} for sms", "SK" + made_up(HEX, 32)),
    _token("vault-service-token", "renewing lease with {} ok", "hvs." + made_up(URLSAFE, 91)),
    _token("vault-service-token-24", "vault login {}", "hvs." + made_up(ALNUM, 24)),
    _token("vault-batch-token", "batch token {} issued", "hvb." + made_up(URLSAFE, 150)),
    _token("webhook-signing-secret", "verifying with {}", "whsec_" + made_up(ALNUM, 32)),
    _shape(
        "dsn-password-with-slash",
        "connecting to mysql://app:pa/ss+w0rd@db.internal:3306/shop",
        "pa/ss+w0rd",
        "ss+w0rd",
    ),
    _shape("auth-key", "auth_key=9f8e7d6c5b4a3f2e1d0c", "9f8e7d6c5b4a3f2e1d0c"),
    _shape("db-pass", "DB_PASS=Winter2024! DB_HOST=db1", "Winter2024!"),
    _token("secret-key-base", "secret_key_base: {}", made_up(HEX, 64)),
    _shape("creds", "backup creds: svc-backup:Tr0ub4dor", "Tr0ub4dor"),
    _shape(
        "docker-config-auth",
        '{"auths": {"registry.example.com": {"auth": "' + _DOCKER_AUTH + '"}}}',
        _DOCKER_AUTH,
    ),
    _shape("curl-u", "curl -sS -u deploy:Hunter2-Pass https://ci.example.com/api/v1/jobs", "Hunter2-Pass"),
    _shape("curl-user-quoted", "curl --user 'ops:S3cure!pw' -X POST https://ci.example.com/h", "S3cure!pw"),
    _shape("password-tail-after-ampersand", "password=kX9&qZ7vLm host=db1", "kX9&qZ7vLm", "qZ7vLm"),
    _shape("password-tail-after-comma", "db_password=aB3,dE6fG9 retries=3", "aB3,dE6fG9", "dE6fG9"),
    _shape("traditional-chinese-label", "資料庫密碼=Taipei101!", "Taipei101!"),
    _shape("korean-label", "DB 암호=Seoul2024#", "Seoul2024#"),
    # --- issuer tokens and the usual syntax ---------------------------------------------------------
    _token("aws-access-key-id", "aws key {} in use", "AKIA" + made_up(B32, 16)),
    _shape(
        "aws-secret-access-key",
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Yd3s9Kt",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Yd3s9Kt",
    ),
    _token("github-pat", "git push https://github.com/o/r with {}", "ghp_" + made_up(ALNUM, 36)),
    _token("github-fine-grained-pat", "GH token {}", "github_pat_" + made_up(ALNUM + "_", 82)),
    _token("gitlab-pat", "using {} for the API", "glpat-" + made_up(URLSAFE, 20)),
    _token("slack-bot-token", "slack {}", "xoxb-1234567890123-1234567890123-" + made_up(ALNUM, 24)),
    _token(
        "slack-webhook-url",
        "POST https://hooks.slack.com/services/T0123ABCD/B0456EFGH/{} 200",
        made_up(ALNUM, 24),
    ),
    _token("stripe-secret-key", "stripe {}", "sk_live_" + made_up(ALNUM, 24)),
    _token("openai-project-key", "OPENAI_KEY {} loaded", "sk-proj-" + made_up(URLSAFE, 48)),
    _token("anthropic-api-key", "key {}", "sk-ant-api03-" + made_up(URLSAFE, 93) + "AA"),
    _token("google-api-key", "maps key {} rejected", "AIza" + made_up(URLSAFE, 35)),
    _token("google-oauth-token", "bearer {} expired?", "ya29." + made_up(URLSAFE, 40)),
    _token("npm-token", "//registry.npmjs.org/:_authToken={}", "npm_" + made_up(ALNUM, 36)),
    _token("pypi-token", "twine upload -p {}", "pypi-AgEIcHlwaS5vcmc" + made_up(URLSAFE, 60)),
    _token("jwt", "id_token {} accepted", _JWT),
    _token("sendgrid-key", "sendgrid {}", "SG." + made_up(URLSAFE, 22) + "." + made_up(URLSAFE, 43)),
    _token("huggingface-token", "HF {} pulled model", "hf_" + made_up(string.ascii_letters, 34)),
    _token("digitalocean-pat", "doctl auth init -t {}", "dop_v1_" + made_up(HEX, 64)),
    _token("shopify-token", "shop token {}", "shpat_" + made_up(HEX, 32)),
    _shape(
        "azure-storage-connection-string",
        "DefaultEndpointsProtocol=https;AccountName=acct1;AccountKey=Zm9vYmFy+/c2VjcmV0a2V5==;"
        "EndpointSuffix=core.windows.net",
        "Zm9vYmFy+/c2VjcmV0a2V5==",
    ),
    _token("azure-ad-client-secret", "app secret {} (expires 2027)", "Abc8Q~" + made_up(ALNUM, 34)),
    _shape("authorization-bearer", "Authorization: Bearer 9f8e7d6c5b4a39281716", "9f8e7d6c5b4a39281716"),
    _shape("authorization-basic", f"Authorization: Basic {_BASIC}", _BASIC),
    _shape("cookie-header", "Cookie: sessionid=q1w2e3r4t5y6; csrftoken=z9x8c7v6", "q1w2e3r4t5y6", "z9x8c7v6"),
    _shape("mysql-glued-p", "mysql -h db -u app -pS3cr3tPw shop", "S3cr3tPw"),
    _shape("password-flag", "pg_dump --password Xy9#kLm2 --host db", "Xy9#kLm2"),
    _shape("url-credentials", "redis://default:Rd5-pAss-9@cache.internal:6379/0", "Rd5-pAss-9"),
    _shape("go-dsn", "dsn=app:Str0ng#Pw@tcp(db.internal:3306)/shop?parseTime=true", "Str0ng#Pw"),
    _token("postman-api-key", "postman {}", "PMAK-" + made_up(HEX, 24) + "-" + made_up(HEX, 34)),
    _token("doppler-token", "doppler {} set", "dp.pt." + made_up(ALNUM, 43)),
    _token("linear-api-key", "linear {}", "lin_api_" + made_up(ALNUM, 40)),
    _token("pulumi-token", "PULUMI {}", "pul-" + made_up(HEX, 40)),
    _token("atlassian-api-token", "jira {}", "ATATT3" + made_up(URLSAFE, 180)),
    _token("databricks-token", "databricks {}", "dapi" + made_up(HEX, 32)),
    _token("grafana-service-account", "grafana {}", "glsa_" + made_up(ALNUM, 32) + "_" + made_up(HEX, 8)),
    _token("age-secret-key", "age {}", "AGE-SECRET-KEY-1" + made_up("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)),
    _token("sentry-user-token", "sentry {}", "sntryu_" + made_up(HEX, 64)),
    _token("heroku-api-key", "heroku {}", "HRKU-AA" + made_up(URLSAFE, 58)),
    _token("notion-token", "notion {}", "ntn_" + made_up(string.digits, 11) + made_up(ALNUM, 35)),
    _token("dynatrace-token", "dynatrace {}", "dt0c01." + made_up(ALNUM, 24) + "." + made_up(ALNUM, 64)),
    _token("planetscale-password", "{} for branch main", "pscale_pw_" + made_up(ALNUM, 43)),
    _shape(
        "rsa-private-key",
        "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(_RSA_BODY) + "\n-----END RSA PRIVATE KEY-----",
        *_RSA_BODY,
    ),
    _shape(
        "openssh-private-key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        + "\n".join(_OPENSSH_BODY)
        + "\n-----END OPENSSH PRIVATE KEY-----",
        *_OPENSSH_BODY,
    ),
    _shape(
        "ssh2-encrypted-private-key",
        '---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nComment: "ops key"\n'
        + "\n".join(_SSH2_BODY)
        + "\n---- END SSH2 ENCRYPTED PRIVATE KEY ----",
        *_SSH2_BODY,
    ),
    _shape("json-password", '{"user": "app", "password": "c0rrect-h0rse"}', "c0rrect-h0rse"),
    _shape("xml-password", "<datasource><password>Xml-S3cret</password></datasource>", "Xml-S3cret"),
    _shape("connection-string-password", "Server=db;User Id=sa;Password=Sql$erver1;", "Sql$erver1"),
    _shape("api-key-header", "X-Api-Key: 7c9e6679f4a34b2e", "7c9e6679f4a34b2e"),
    _shape("yaml-passwd", "  passwd: Yaml-Pa55", "Yaml-Pa55"),
    # where a log or a JSON string puts a token: inside punctuation, at the start of a line
    _token("token-in-parentheses", "key rotated (old one: {}), see OPS-4711", "pul-" + made_up(HEX, 40)),
    _token("token-before-comma", "keys {}, then retry.", "SK" + made_up(HEX, 32)),
    _token(
        "token-after-newline",
        "request headers:\n{}\nend",
        "PMAK-" + made_up(HEX, 24) + "-" + made_up(HEX, 34),
    ),
    _token("own-token-after-newline", "config:\n{}", "ghp_" + made_up(ALNUM, 36)),
    _shape("key-after-newline", "connect failed\npassword=Nl-S3cret-9 retrying", "Nl-S3cret-9"),
    _shape("key-after-tab", "env:\tdb_pass: Tab-S3cret-7", "Tab-S3cret-7"),
]


def ordinary_lines() -> list[str]:
    """The ordinary log lines, one per line of the file (blank lines and `#` comments skipped)."""
    lines = ORDINARY_FILE.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]
