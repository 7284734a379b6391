"""Scripted tasks on ``@modelcontextprotocol/server-postgres`` over the seeded ``shop`` database.

``shop`` (PostgreSQL 15) has categories (two levels: Kitchen, Garden, Office, Outdoor and their
subcategories), suppliers, products, customers, orders (with a status), order_items and
reviews; a few hundred deterministic rows. The server's one tool, ``query``, runs each
statement in a READ ONLY transaction, so the issue's "write a summary table" cannot be done
here: the tasks compute summary tables instead (GROUP BY over joins: revenue per category,
per month, per country) and answer questions with SQL, after looking at the schema first as
an engineer would. One task tries an UPDATE and sees the server refuse it.

Each check recomputes the true answer with its own SQL, run by ``psql`` as the ``postgres``
superuser in the container (``json_agg`` of the rows), and compares it row by row, in order,
with the rows of the episode's last answered query (numbers compared as decimals: the server
returns numeric and bigint values as strings).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from worldtrace.collectors.mcp.tasks import (
    CheckContext,
    McpTask,
    all_of,
    calls,
    json_text,
    last_answer,
)
from worldtrace.collectors.tool_calls import tool_call
from worldtrace.schemas import Action

PSQL = ["runuser", "-u", "postgres", "--", "psql", "-h", "/run/postgresql", "-d", "shop"]
PSQL_OPTIONS = ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"]


def psql_rows(context: CheckContext, sql: str) -> list[dict[str, Any]]:
    """The rows ``sql`` returns, from ``psql`` in the container (numbers as decimals)."""
    wrapped = f"SELECT coalesce(json_agg(answer), '[]'::json) FROM ({sql}) AS answer"
    output = context.run([*PSQL, *PSQL_OPTIONS, "-c", wrapped])
    return json.loads(output, parse_float=Decimal)


def _same(first: Any, second: Any) -> bool:
    if first == second:
        return True
    if isinstance(first, bool) or isinstance(second, bool):
        return False
    try:
        return Decimal(str(first)) == Decimal(str(second))
    except InvalidOperation:
        return False


def rows_equal(answer: Sequence[Any], truth: Sequence[Mapping[str, Any]]) -> bool:
    """True if both have the same rows in the same order, column names and values alike."""
    if len(answer) != len(truth):
        return False
    for got, wanted in zip(answer, truth, strict=True):
        if not isinstance(got, Mapping) or sorted(got) != sorted(wanted):
            return False
        if not all(_same(got[key], wanted[key]) for key in wanted):
            return False
    return True


def answer_is(truth_sql: str) -> Callable[[CheckContext], bool]:
    """The last answered query returned exactly the rows ``truth_sql`` computes."""

    def check(context: CheckContext) -> bool:
        answer = json_text(last_answer(context, "query"))
        if not isinstance(answer, list):
            return False
        truth = psql_rows(context, truth_sql)
        return bool(truth) and rows_equal(answer, truth)

    return check


def write_refused(context: CheckContext) -> bool:
    """The episode's first call tried to write and the server refused it as read-only."""
    episode = calls(context, "query")
    if not episode:
        return False
    error = episode[0].get("protocol_error")
    result = episode[0].get("result")
    message = str((error or {}).get("message", "")) if isinstance(error, Mapping) else ""
    if isinstance(result, Mapping) and result.get("isError"):
        message += json.dumps(result.get("content"))
    return "read-only transaction" in message


def unchanged(sql: str, expected: str) -> Callable[[CheckContext], bool]:
    """``sql`` (one value) still gives ``expected``: nothing was written."""

    def check(context: CheckContext) -> bool:
        return context.run([*PSQL, *PSQL_OPTIONS, "-c", sql]).strip() == expected

    return check


def _query(sql: str) -> Action:
    return tool_call("query", {"sql": " ".join(sql.split())})


def _columns(*tables: str) -> Action:
    names = ", ".join(f"'{table}'" for table in tables)
    return _query(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        f"WHERE table_schema = 'public' AND table_name IN ({names}) "
        "ORDER BY table_name, ordinal_position"
    )


LIST_TABLES = _query(
    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
    "ORDER BY table_name"
)

TASKS: tuple[McpTask, ...] = (
    McpTask(
        name="postgres-top-customers-by-spend",
        instruction=(
            "Who are the five customers who spent the most on delivered orders? Give their "
            "names, cities and totals."
        ),
        category="question",
        server="postgres",
        steps=(
            LIST_TABLES,
            _columns("customers", "orders", "order_items"),
            _query(
                """SELECT c.first_name, c.last_name, c.city,
                          sum(oi.quantity * oi.unit_price) AS spent
                   FROM customers c JOIN orders o ON o.customer_id = c.id
                   JOIN order_items oi ON oi.order_id = o.id
                   WHERE o.status = 'delivered'
                   GROUP BY c.id, c.first_name, c.last_name, c.city
                   ORDER BY spent DESC, c.id LIMIT 5"""
            ),
        ),
        check=answer_is(
            """SELECT first_name, last_name, city, spent FROM (
                 SELECT c.id, c.first_name, c.last_name, c.city,
                        (SELECT sum(i.quantity * i.unit_price) FROM order_items i
                         WHERE i.order_id IN (SELECT id FROM orders
                                              WHERE customer_id = c.id
                                              AND status = 'delivered')) AS spent
                 FROM customers c) per_customer
               WHERE spent IS NOT NULL ORDER BY spent DESC, id LIMIT 5"""
        ),
    ),
    McpTask(
        name="postgres-revenue-by-top-category",
        instruction=(
            "Build a summary table of revenue per top-level category (Kitchen, Garden, Office, "
            "Outdoor) over all orders that were not cancelled, largest first."
        ),
        category="summary",
        server="postgres",
        steps=(
            _columns("categories", "products"),
            _query("SELECT id, name, parent_id FROM categories ORDER BY id"),
            _query(
                """SELECT top.name AS category, sum(oi.quantity * oi.unit_price) AS revenue
                   FROM order_items oi JOIN orders o ON o.id = oi.order_id
                   JOIN products p ON p.id = oi.product_id
                   JOIN categories sub ON sub.id = p.category_id
                   JOIN categories top ON top.id = coalesce(sub.parent_id, sub.id)
                   WHERE o.status <> 'cancelled'
                   GROUP BY top.name ORDER BY revenue DESC"""
            ),
        ),
        check=answer_is(
            """WITH RECURSIVE roots(id, root) AS (
                 SELECT id, id FROM categories WHERE parent_id IS NULL
                 UNION ALL SELECT c.id, r.root FROM categories c JOIN roots r ON c.parent_id = r.id)
               SELECT cat.name AS category, sum(oi.quantity * oi.unit_price) AS revenue
               FROM order_items oi
               JOIN products p ON p.id = oi.product_id
               JOIN roots r ON r.id = p.category_id
               JOIN categories cat ON cat.id = r.root
               WHERE oi.order_id NOT IN (SELECT id FROM orders WHERE status = 'cancelled')
               GROUP BY cat.name ORDER BY revenue DESC"""
        ),
    ),
    McpTask(
        name="postgres-low-stock-reorder-list",
        instruction=(
            "Prepare a reorder list: every product with fewer than 20 units in stock, with its "
            "supplier's name and email, lowest stock first."
        ),
        category="question",
        server="postgres",
        steps=(
            _columns("products", "suppliers"),
            _query("SELECT count(*) AS low FROM products WHERE stock < 20"),
            _query(
                """SELECT p.sku, p.name AS product, p.stock, s.name AS supplier, s.email
                   FROM products p JOIN suppliers s ON s.id = p.supplier_id
                   WHERE p.stock < 20 ORDER BY p.stock, p.sku"""
            ),
        ),
        check=answer_is(
            """SELECT p.sku, p.name AS product, p.stock,
                      (SELECT name FROM suppliers WHERE id = p.supplier_id) AS supplier,
                      (SELECT email FROM suppliers WHERE id = p.supplier_id) AS email
               FROM products p WHERE p.stock <= 19 ORDER BY p.stock, p.sku"""
        ),
    ),
    McpTask(
        name="postgres-monthly-orders-2024",
        instruction=(
            "Summarize 2024 month by month: the number of orders placed and their revenue "
            "(cancelled orders excluded from both)."
        ),
        category="summary",
        server="postgres",
        steps=(
            _query(
                "SELECT min(ordered_on)::text AS first, max(ordered_on)::text AS last FROM orders"
            ),
            _query(
                """SELECT to_char(o.ordered_on, 'YYYY-MM') AS month,
                          count(DISTINCT o.id) AS orders,
                          sum(oi.quantity * oi.unit_price) AS revenue
                   FROM orders o JOIN order_items oi ON oi.order_id = o.id
                   WHERE o.status <> 'cancelled'
                     AND o.ordered_on >= DATE '2024-01-01' AND o.ordered_on < DATE '2025-01-01'
                   GROUP BY month ORDER BY month"""
            ),
        ),
        check=answer_is(
            """SELECT month, count(*) AS orders, sum(total) AS revenue FROM (
                 SELECT to_char(date_trunc('month', o.ordered_on), 'YYYY-MM') AS month,
                        (SELECT sum(quantity * unit_price) FROM order_items
                         WHERE order_id = o.id) AS total
                 FROM orders o
                 WHERE o.status != 'cancelled' AND extract(year FROM o.ordered_on) = 2024
               ) per_order GROUP BY month ORDER BY month"""
        ),
    ),
    McpTask(
        name="postgres-best-rated-products",
        instruction=(
            "Which products are rated best? List the five with the highest average rating "
            "among those with at least three reviews, with the average to two decimals."
        ),
        category="question",
        server="postgres",
        steps=(
            _columns("reviews"),
            _query(
                "SELECT rating, count(*) AS reviews FROM reviews GROUP BY rating ORDER BY rating"
            ),
            _query(
                """SELECT p.name AS product, count(*) AS reviews,
                          round(avg(r.rating), 2) AS average
                   FROM reviews r JOIN products p ON p.id = r.product_id
                   GROUP BY p.id, p.name HAVING count(*) >= 3
                   ORDER BY average DESC, reviews DESC, p.name LIMIT 5"""
            ),
        ),
        check=answer_is(
            """SELECT name AS product, reviews, average FROM (
                 SELECT p.name, (SELECT count(*) FROM reviews WHERE product_id = p.id) AS reviews,
                        (SELECT round(sum(rating)::numeric / count(*), 2) FROM reviews
                         WHERE product_id = p.id) AS average
                 FROM products p) rated
               WHERE reviews >= 3 ORDER BY average DESC, reviews DESC, name LIMIT 5"""
        ),
    ),
    McpTask(
        name="postgres-customers-who-never-ordered",
        instruction=(
            "Marketing wants to reach customers who signed up but never placed an order: list "
            "them (name, email, sign-up date) oldest sign-up first."
        ),
        category="question",
        server="postgres",
        steps=(
            _query("SELECT count(*) AS customers FROM customers"),
            _query("SELECT count(DISTINCT customer_id) AS with_orders FROM orders"),
            _query(
                """SELECT c.first_name, c.last_name, c.email, c.signed_up::text AS signed_up
                   FROM customers c LEFT JOIN orders o ON o.customer_id = c.id
                   WHERE o.id IS NULL ORDER BY c.signed_up, c.id"""
            ),
        ),
        check=answer_is(
            """SELECT first_name, last_name, email, to_char(signed_up, 'YYYY-MM-DD') AS signed_up
               FROM customers c
               WHERE NOT EXISTS (SELECT 1 FROM orders WHERE customer_id = c.id)
               ORDER BY c.signed_up, c.id"""
        ),
    ),
    McpTask(
        name="postgres-order-status-breakdown",
        instruction=(
            "Give a summary table of orders by status: how many and what share of all orders "
            "(a percentage with one decimal), most common first."
        ),
        category="summary",
        server="postgres",
        steps=(
            _query("SELECT DISTINCT status FROM orders ORDER BY status"),
            _query(
                """SELECT status, count(*) AS orders,
                          round(100.0 * count(*) / sum(count(*)) OVER (), 1) AS percent
                   FROM orders GROUP BY status ORDER BY orders DESC, status"""
            ),
        ),
        check=answer_is(
            """SELECT s.status, s.orders,
                      round(s.orders * 100.0 / (SELECT count(*) FROM orders), 1) AS percent
               FROM (SELECT status, count(*) AS orders FROM orders GROUP BY status) s
               ORDER BY s.orders DESC, s.status"""
        ),
    ),
    McpTask(
        name="postgres-revenue-by-country",
        instruction=(
            "Which countries bring the most revenue? Summarize delivered and shipped orders by "
            "the customer's country: customers, orders and revenue, largest revenue first."
        ),
        category="summary",
        server="postgres",
        steps=(
            _columns("customers"),
            _query("SELECT country, count(*) AS customers FROM customers GROUP BY country"),
            _query(
                """SELECT c.country, count(DISTINCT c.id) AS customers,
                          count(DISTINCT o.id) AS orders,
                          sum(oi.quantity * oi.unit_price) AS revenue
                   FROM customers c JOIN orders o ON o.customer_id = c.id
                   JOIN order_items oi ON oi.order_id = o.id
                   WHERE o.status IN ('delivered', 'shipped')
                   GROUP BY c.country ORDER BY revenue DESC, c.country"""
            ),
        ),
        check=answer_is(
            """WITH sold AS (
                 SELECT o.id, o.customer_id,
                        (SELECT sum(quantity * unit_price) FROM order_items
                         WHERE order_id = o.id) AS total
                 FROM orders o WHERE o.status = 'delivered' OR o.status = 'shipped')
               SELECT c.country, count(DISTINCT c.id) AS customers, count(*) AS orders,
                      sum(sold.total) AS revenue
               FROM sold JOIN customers c ON c.id = sold.customer_id
               GROUP BY c.country ORDER BY revenue DESC, c.country"""
        ),
    ),
    McpTask(
        name="postgres-price-drift-audit",
        instruction=(
            "Audit the order lines: for each supplier, how many order lines were sold at a "
            "unit price different from the product's current list price, out of how many."
        ),
        category="question",
        server="postgres",
        steps=(
            _columns("order_items", "products"),
            _query(
                """SELECT s.name AS supplier, count(*) AS lines,
                          count(*) FILTER (WHERE oi.unit_price <> p.price) AS drifted
                   FROM order_items oi JOIN products p ON p.id = oi.product_id
                   JOIN suppliers s ON s.id = p.supplier_id
                   GROUP BY s.name ORDER BY s.name"""
            ),
        ),
        check=answer_is(
            """SELECT s.name AS supplier,
                      (SELECT count(*) FROM order_items oi JOIN products p ON p.id = oi.product_id
                       WHERE p.supplier_id = s.id) AS lines,
                      (SELECT count(*) FROM order_items oi JOIN products p ON p.id = oi.product_id
                       WHERE p.supplier_id = s.id AND oi.unit_price != p.price) AS drifted
               FROM suppliers s
               WHERE EXISTS (SELECT 1 FROM products p JOIN order_items oi
                             ON oi.product_id = p.id WHERE p.supplier_id = s.id)
               ORDER BY s.name"""
        ),
    ),
    McpTask(
        name="postgres-restock-refused-then-report",
        instruction=(
            "Try to restock the Cast Iron Skillet to 100 units; the connection is read-only, "
            "so when the server refuses, report its current stock and supplier instead."
        ),
        category="recover",
        server="postgres",
        steps=(
            _query("UPDATE products SET stock = 100 WHERE name = 'Cast Iron Skillet'"),
            _query(
                """SELECT p.name AS product, p.stock, s.name AS supplier
                   FROM products p JOIN suppliers s ON s.id = p.supplier_id
                   WHERE p.name = 'Cast Iron Skillet'"""
            ),
        ),
        check=all_of(
            write_refused,
            unchanged(
                "SELECT count(*) FROM products WHERE name = 'Cast Iron Skillet' AND stock = 100",
                "0",
            ),
            answer_is(
                """SELECT p.name AS product, p.stock,
                          (SELECT name FROM suppliers WHERE id = p.supplier_id) AS supplier
                   FROM products p WHERE p.name = 'Cast Iron Skillet'"""
            ),
        ),
    ),
)
"""The postgres server's tasks."""
