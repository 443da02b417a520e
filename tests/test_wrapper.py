"""Issue 31, lever 4: a thin wrapper that ranks first gives way to the unit it delegates to when
the question describes the work, through a real index of a real git repository."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from coderag.settings import get_settings
from coderag_retriever.search import rank
from tests.conftest import indexed

SOURCES = {
    "billing/invoice.py": (
        "def compute_invoice_total(invoice):\n"
        '    """The invoice total."""\n'
        "    return _sum_lines(invoice.lines)\n"
        "\n"
        "\n"
        "def _sum_lines(lines):\n"
        "    subtotal = 0\n"
        "    for line in lines:\n"
        "        subtotal += line.price * line.quantity\n"
        "    discount = subtotal * 0.1 if subtotal > 1000 else 0\n"
        "    return subtotal - discount\n"
    ),
    "billing/report.py": (
        "def print_report(invoices):\n"
        "    for invoice in invoices:\n"
        "        print(invoice.number, invoice.customer)\n"
    ),
}


@pytest.fixture
def billing(tmp_path: Path) -> Iterator[TestClient]:
    with indexed(tmp_path / "billing", "billing", SOURCES) as client:
        yield client


def test_a_thin_wrapper_gives_way_to_its_callee(billing: TestClient) -> None:
    settings = get_settings()
    assert not settings.wrapper_callee  # off by default until the tuning split says otherwise
    on = settings.model_copy(update={"wrapper_callee": True})
    question = "How is the invoice total computed?"
    before = [r.unit.symbol for r in rank("billing", question, 3, settings)]
    after = [r.unit.symbol for r in rank("billing", question, 3, on)]
    assert before[0] == "compute_invoice_total", before
    assert after[:2] == ["_sum_lines", "compute_invoice_total"], after
    assert sorted(after) == sorted(before)  # moved, nothing dropped
    # naming the wrapper asks for it
    named = [r.unit.symbol for r in rank("billing", "compute_invoice_total", 3, on)]
    assert named[0] == "compute_invoice_total", named
    # a unit with more than a thin body is not a wrapper
    report = [r.unit.symbol for r in rank("billing", "How are invoices printed?", 3, on)]
    assert report[0] == "print_report", report
