"""The API's contract as a client reads it (issue #30): each operation's roles and every error answer
(``application/problem+json``, the problem schema) in the OpenAPI document, and ``/docs`` working on a
closed network (Swagger UI served from the package, no CDN)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.backoffice.conftest import running_server

# Who may do what (docs/integration.md), written out here rather than read from the code under test.
ROLES_OF = {
    ("get", "/v1/accounts/{account_id}/balance"): ["admin", "auditor", "cashier", "terminal"],
    ("get", "/v1/accounts/{account_id}/statement"): ["admin", "auditor", "cashier"],
    ("get", "/v1/rounds/{coup_id}"): ["admin", "analyst", "auditor", "operator"],
    ("get", "/v1/tables"): ["admin", "analyst", "auditor", "operator"],
    ("get", "/v1/tables/{table_id}/report"): ["admin", "analyst", "auditor", "operator"],
    ("get", "/v1/alerts"): ["admin", "analyst", "auditor", "operator"],
    ("get", "/v1/findings"): ["admin", "auditor", "operator"],
    ("post", "/v1/cashier/deposits"): ["admin", "cashier"],
    ("post", "/v1/cashier/withdrawals"): ["admin", "cashier"],
    ("post", "/v1/bets"): ["admin", "terminal"],
    ("post", "/v1/alerts/{alert_id}/acknowledge"): ["admin", "analyst"],
    ("get", "/v1/alerts/{alert_id}/evidence"): ["admin", "analyst", "auditor", "operator"],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, demo_log: Path) -> Iterator[str]:
    """``serve``'s application on a real server over the demo log."""
    tmp = tmp_path_factory.mktemp("contract")
    with running_server(demo_log, f"sqlite:///{tmp / 'read.db'}", None) as url:
        yield url


@pytest.fixture(scope="module")
def document(server: str) -> dict[str, Any]:
    """The served OpenAPI document."""
    doc: dict[str, Any] = httpx.get(f"{server}/openapi.json", timeout=30).json()
    return doc


def test_every_operation_says_its_roles(document: dict[str, Any]) -> None:
    """Each operation that needs a key lists its roles (``x-roles``, and in its description) and the
    bearer scheme; the health check needs neither."""
    paths = document["paths"]
    for (method, path), roles in ROLES_OF.items():
        op = paths[path][method]
        assert op["x-roles"] == roles, (method, path)
        assert f"Roles: {', '.join(roles)}" in op["description"]
        assert op["security"] == [{"HTTPBearer": []}]
    for path, operations in paths.items():
        for method, op in operations.items():
            if path.startswith("/v1/") and path != "/v1/health":
                assert op.get("x-roles"), (method, path)
    health = paths["/v1/health"]["get"]
    assert "x-roles" not in health and "security" not in health


def test_every_error_is_problem_json_with_its_schema(document: dict[str, Any], server: str) -> None:
    """Every 4xx/5xx answer of every operation is documented as ``application/problem+json`` with the
    problem schema, never ``application/json``; and the server does answer that way (401, 404, 422)."""
    problem = document["components"]["schemas"]["ProblemBody"]
    assert set(problem["required"]) >= {"type", "title", "status", "detail"}
    seen = 0
    for path, operations in document["paths"].items():
        for method, op in operations.items():
            for code, answer in op["responses"].items():
                if int(code) >= 400:
                    seen += 1
                    assert answer["content"] == {
                        "application/problem+json": {"schema": {"$ref": "#/components/schemas/ProblemBody"}}
                    }, (method, path, code)
    assert seen >= 50
    assert "HTTPValidationError" not in document["components"]["schemas"]
    for r in (httpx.get(f"{server}/v1/tables", timeout=30),
              httpx.get(f"{server}/no-such-route", timeout=30),
              httpx.post(f"{server}/v1/bets", json={}, timeout=30,
                         headers={"Authorization": "Bearer x", "Idempotency-Key": "k"})):  # fmt: skip
        assert r.status_code >= 400
        assert r.headers["content-type"].startswith("application/problem+json")
        assert set(r.json()) >= {"type", "title", "status", "detail"}


def test_docs_load_nothing_from_outside(server: str) -> None:
    """``/docs`` refers only to its own server (no CDN: a casino's closed network shows it), and the
    Swagger UI files it names are served, JavaScript and CSS of a real size."""
    page = httpx.get(f"{server}/docs", timeout=30)
    assert page.status_code == 200
    sources = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    sources += re.findall(r"""url:\s*["']([^"']+)["']""", page.text)
    assert sources, page.text
    assert not [s for s in sources if re.match(r"^(https?:)?//", s)], sources
    assert "cdn" not in page.text.lower()
    for asset, kind in (("swagger-ui-bundle.js", "javascript"), ("swagger-ui.css", "css")):
        assert any(s.endswith(asset) for s in sources), (asset, sources)
        path = next(s for s in sources if s.endswith(asset))
        r = httpx.get(f"{server}{path}", timeout=30)
        assert r.status_code == 200 and kind in r.headers["content-type"] and len(r.content) > 10_000
