"""Whether a SELECT reads a secret-named column or JSON key anywhere, not only in its result columns.

Hiding result columns by name is not enough: a statement that compares, joins, groups, sorts or
transforms a secret column elsewhere spells its value out in columns that look harmless (a recursive
CTE of positions joined on `SUBSTRING(u.password, n.i, 1) = 'a'`, or `WHERE password = '...'` used as
an oracle), and `JSON_EXTRACT(doc, '$.password')` reads a secret key of a JSON column. So the guard
refuses any statement whose tree names one, wherever it sits, before anything reaches the server.

"Secret-named" is `tools.secret_names.names_secret`, the one vocabulary every redaction step uses, so
`password_expired` and `token_count` (facts ABOUT a secret) stay readable. Where a name can be read
under another spelling the check fails closed: a column name is also judged in every casing the server
would resolve (`PASSWORDHASH` for `passwordHash`) and with accents and compatibility forms folded away
(`pàssword`, `ｐａｓｓｗｏｒｄ`); a JSON path key (matched exactly by the server) holding an escape is
refused outright, because which key the server then reads depends on its JSON path parser.

A `*` hands the statement columns the guard cannot see. Where they keep their own names (the
statement's result, a derived table or CTE read by name later, `EXISTS`) the adapter hides a secret
one by its name, and any later clause that reads it names it, which is refused here. Everywhere else
a `*`'s columns are compared or renamed without being named (a set operation, a column list
`d(a, b, x)`, `IN (SELECT * ...)`, a scalar subquery, `ORDER BY 3`), so those are refused, as is
`NATURAL JOIN` (it compares same-named columns implicitly) and a column list on a table alias.
"""

from __future__ import annotations

import unicodedata

from sqlglot import exp

from tools.secret_names import names_secret


def secret_read(root: exp.Expr) -> str | None:
    """What in the statement reads a secret (for logs and tests), or None when nothing does."""
    for node in root.walk():
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            if identifier_names_secret(node.name):
                return f"column {node.name}"
        elif isinstance(node, exp.JSONPathKey) and isinstance(node.this, str):
            if "\\" in node.this or names_secret(node.this):  # JSON keys match exactly
                return f"JSON key {node.this}"
        elif isinstance(node, exp.Join):
            if node.method == "NATURAL":
                return "NATURAL JOIN compares columns the statement does not name"
            for name in node.args.get("using") or ():
                if identifier_names_secret(name.name):
                    return f"USING {name.name}"
        elif isinstance(node, exp.Table) and renames_columns(node):
            return "a column list renames a table's columns"
        elif isinstance(node, exp.Star) and (problem := _star_problem(node)) is not None:
            return problem
    return None


def identifier_names_secret(name: str) -> bool:
    """Whether some spelling the server would resolve `name` to names a secret.

    Column names are case-insensitive, so `PASSWORDHASH` reads a column `passwordHash` although the
    head-noun rule splits words at case changes: the lower-case name is also judged split once at every
    position (one case change, the spelling a camel-case secret loses). Accents and compatibility forms
    are folded too, which a server's identifier collation may ignore. Refusing a look-alike costs the
    model a rename; missing one leaks a value.
    """
    decomposed = unicodedata.normalize("NFKD", name)
    folded = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    for spelling in dict.fromkeys((name, folded)):
        if names_secret(spelling):
            return True
        lowered = spelling.lower()
        if any(names_secret(f"{lowered[:cut]}_{lowered[cut:]}") for cut in range(len(lowered) + 1)):
            return True
    return False


def renames_columns(source: exp.Table | exp.CTE | exp.Subquery) -> bool:
    """True when the source's alias renames its columns (`AS t (a, b)`)."""
    alias = source.args.get("alias")
    return isinstance(alias, exp.TableAlias) and bool(alias.columns)


def _star_problem(star: exp.Star) -> str | None:
    """Why this `*` could let a secret column be read without being named, or None when it cannot."""
    parent = star.parent
    if isinstance(parent, exp.Count) and parent.this is star:
        return None  # COUNT(*) reads no value
    projection: exp.Expr = parent if isinstance(parent, exp.Column) and parent.this is star else star
    select = projection.parent
    if not isinstance(select, exp.Select) or projection.arg_key != "expressions":
        return "a * outside a select list"
    if has_positional_reference(select):
        return "ORDER BY or GROUP BY a position over a *"
    holder = select.parent
    if holder is None or isinstance(holder, exp.Exists):
        return None
    if isinstance(holder, exp.CTE) and not renames_columns(holder):
        return None
    if (
        isinstance(holder, exp.Subquery)
        and isinstance(holder.parent, (exp.From, exp.Join))
        and not renames_columns(holder)
    ):
        return None
    return f"a * whose columns reach a {type(holder).__name__} unnamed"


def has_positional_reference(select: exp.Select) -> bool:
    """`ORDER BY 3` / `GROUP BY 3` name a result column by its position: over a `*`, maybe a secret one."""
    order = select.args.get("order")
    group = select.args.get("group")
    keys = [ordered.this for ordered in order.expressions] if isinstance(order, exp.Order) else []
    keys += list(group.expressions) if isinstance(group, exp.Group) else []
    return any(isinstance(key, exp.Literal) and not key.is_string for key in keys)
