import sqlite3

import pytest

from aquilia_app.query import Q, QueryError, insert_sql


def test_chain_compiles_parameterized_sql():
    q = Q("items").filter(price__gte=10, name__contains="a%b_").exclude(id__in=[1, 2]).order("-price", "id").limit(5).offset(10)
    sql, params = q.sql()
    assert sql == ('SELECT * FROM "items" WHERE ("price" >= ? AND "name" LIKE ? ESCAPE \'\\\') AND NOT ("id" IN (?, ?))'
                   ' ORDER BY "price" DESC, "id" ASC LIMIT ? OFFSET ?')
    assert params == (10, "%a\\%b\\_%", 1, 2, 5, 10)


def test_values_never_in_sql_text():
    evil = "x'; DROP TABLE items; --"
    sql, params = Q("items").filter(name=evil).sql()
    assert evil not in sql and params == (evil,)


def test_immutability_and_cheap_clone():
    base = Q("t").filter(a=1)
    q2 = base.filter(b=2)
    assert base.sql() == ('SELECT * FROM "t" WHERE "a" = ?', (1,))
    assert q2.sql() == ('SELECT * FROM "t" WHERE "a" = ? AND "b" = ?', (1, 2))
    q3 = q2.limit(3)
    assert q3._where is q2._where  # clauses shared, not copied


def test_lookups_and_nulls():
    assert Q("t").filter(a=None).sql()[0].endswith('"a" IS NULL')
    assert Q("t").filter(a__ne=None).sql()[0].endswith('"a" IS NOT NULL')
    assert Q("t").filter(a__isnull=False).sql()[0].endswith('"a" IS NOT NULL')
    assert Q("t").filter(a__in=[]).sql() == ('SELECT * FROM "t" WHERE 0', ())
    assert Q("t").filter(a__startswith="ab").sql()[1] == ("ab%",)
    assert Q("t", ["id", "name"]).count_sql() == ('SELECT COUNT(*) FROM "t"', ())
    assert Q("t").only("id").sql()[0] == 'SELECT "id" FROM "t"'
    assert Q("t").offset(5).sql() == ('SELECT * FROM "t" LIMIT ? OFFSET ?', (-1, 5))


@pytest.mark.parametrize("make", [
    lambda: Q("bad name"),
    lambda: Q("t").filter(**{"a;b": 1}),
    lambda: Q("t").filter(a__regex="x"),
    lambda: Q("t").filter(a__in="abc"),
    lambda: Q("t").filter(a__lt=None),
    lambda: Q("t").order("-"),
    lambda: Q("t").limit(-1),
    lambda: Q("t").limit(True),
    lambda: Q("t").offset("3"),
    lambda: Q("t").update_sql(),
    lambda: insert_sql("t", {}),
])
def test_errors(make):
    with pytest.raises(QueryError):
        make()


def test_runs_against_sqlite():
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price REAL)")
    for i in range(10):
        db.execute(*insert_sql("items", {"name": f"n{i}%", "price": i}))
    q = Q("items").filter(price__gte=3).exclude(name__contains="5%").order("-price").limit(3).offset(1)
    rows = db.execute(*q.sql()).fetchall()
    assert [r[2] for r in rows] == [8.0, 7.0, 6.0]
    assert db.execute(*q.count_sql()).fetchone()[0] == 6
    db.execute(*Q("items").filter(id=1).update_sql(name="z"))
    assert db.execute('SELECT name FROM items WHERE id=1').fetchone()[0] == "z"
    db.execute(*Q("items").filter(price__lt=5).delete_sql())
    assert db.execute("SELECT COUNT(*) FROM items").fetchone()[0] == 5
