"""A small shop service with a scripted, dated git history (four authors, June to November 2026),
built the same way every time: fixed author and committer names, e-mails and dates make the
commit hashes reproducible. ``bench/answers.py`` asks its who/when questions
(``questions/history.jsonl``) of it, with "now" fixed at ``NOW``.

    python -m bench.git_history DIR     # build it in DIR and print the log
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
"""The moment the questions are asked ("last month" is October 2026, "last week" 9-15 Nov)."""

AUTHORS = {
    "ada": ("Ada Lovelace", "ada@shop.example"),
    "bo": ("Bo Li", "bo@shop.example"),
    "chen": ("Chen Wei", "chen@shop.example"),
    "dana": ("Dana Scully", "dana@shop.example"),
}

INITIAL = {
    "README.md": "# shop\n\nOrders, payments, invoices and shipping for the example shop.\n",
    "shop/__init__.py": '"""The example shop service."""\n',
    "shop/orders.py": '''"""Orders: creation, timeouts and expiry."""

import time

ORDER_TIMEOUT_MINUTES = 30


def order_timeout_seconds(merchant=None):
    """Seconds an unpaid order stays open before it expires."""
    return ORDER_TIMEOUT_MINUTES * 60


def create_order(customer, items):
    """Create an order for a customer with the given items."""
    if not items:
        raise ValueError("an order needs at least one item")
    return {"customer": customer, "items": list(items), "created": time.time()}


def cancel_expired_orders(orders, now):
    """Cancel every unpaid order older than the order timeout."""
    limit = order_timeout_seconds()
    for order in orders:
        if not order.get("paid") and now - order["created"] > limit:
            order["status"] = "cancelled"
    return orders
''',
    "shop/payments.py": '''"""Payments: charging cards, retrying failures, refunds."""

import time


class PaymentError(Exception):
    """A charge the payment provider declined."""


def charge(card, amount):
    """Charge a card; raises PaymentError when the provider declines."""
    if amount <= 0:
        raise PaymentError("amount must be positive")
    return {"card": card, "amount": amount}


def retry_payment(card, amount, attempts=3):
    """Retry a declined charge a few times before giving up."""
    for attempt in range(attempts):
        try:
            return charge(card, amount)
        except PaymentError:
            time.sleep(1)
    raise PaymentError("payment failed after retries")


def refund(payment):
    """Refund a payment in full."""
    return {"refunded": payment["amount"]}
''',
    "shop/invoice.py": '''"""Invoices: totals, discounts and tax."""

TAX_RATE = 0.2


def tax_for(amount):
    """Tax due on an amount."""
    return amount * TAX_RATE


def apply_discount(total, percent):
    """Take a percentage off a total."""
    return total * (100 - percent) / 100


def invoice_total(lines):
    """The amount due for an invoice's lines, tax included."""
    subtotal = sum(line["price"] * line["qty"] for line in lines)
    return subtotal + tax_for(subtotal)
''',
    "shop/shipping.py": '''"""Shipping: costs and delivery estimates."""

import datetime


def shipping_cost(weight_kg):
    """Shipping cost of a parcel by weight."""
    return 5 + 2 * weight_kg


def estimate_delivery(sent):
    """Expected delivery date of a parcel sent on the given date."""
    return sent + datetime.timedelta(days=3)
''',
    "shop/config.py": '''"""Settings of the shop service."""


def load_settings():
    """The service settings, with their defaults."""
    return {"currency": "EUR", "debug": False}
''',
    "shop/auth.py": '''"""API tokens."""

import time


def check_token(token, now=None):
    """Whether an API token is valid and not expired."""
    now = now or time.time()
    return bool(token) and token.get("expires", 0) > now
''',
}
"""The files of the first commit."""

COMMITS: list[tuple[str, str, str, str, str, str]] = [
    ("2026-07-10T09:30:00", "bo", "Add retry backoff to payment retries", "shop/payments.py",
     "            time.sleep(1)\n", "            time.sleep(2 ** attempt)\n"),
    ("2026-08-05T14:00:00", "chen", "Compute invoice tax per line", "shop/invoice.py",
     '    subtotal = sum(line["price"] * line["qty"] for line in lines)\n'
     "    return subtotal + tax_for(subtotal)\n",
     '    subtotal = sum(line["price"] * line["qty"] for line in lines)\n'
     '    tax = sum(tax_for(line["price"] * line["qty"]) for line in lines)\n'
     "    return subtotal + tax\n"),
    ("2026-08-20T11:15:00", "dana", "Cap shipping cost for heavy parcels", "shop/shipping.py",
     "    return 5 + 2 * weight_kg\n", "    return min(5 + 2 * weight_kg, 60)\n"),
    ("2026-09-03T10:00:00", "ada", "Raise order timeout to 45 minutes", "shop/orders.py",
     "ORDER_TIMEOUT_MINUTES = 30\n", "ORDER_TIMEOUT_MINUTES = 45\n"),
    ("2026-09-15T16:45:00", "bo", "Refund partial amounts", "shop/payments.py",
     'def refund(payment):\n    """Refund a payment in full."""\n'
     '    return {"refunded": payment["amount"]}\n',
     'def refund(payment, amount=None):\n    """Refund a payment, in full or in part."""\n'
     '    return {"refunded": payment["amount"] if amount is None else amount}\n'),
    ("2026-09-28T08:20:00", "chen", "Read settings from SHOP_ environment variables",
     "shop/config.py",
     '    return {"currency": "EUR", "debug": False}\n',
     '    import os\n\n    return {"currency": os.environ.get("SHOP_CURRENCY", "EUR"),\n'
     '            "debug": os.environ.get("SHOP_DEBUG") == "1"}\n'),
    ("2026-10-06T13:10:00", "dana", "Order timeout honours a per-merchant override",
     "shop/orders.py",
     "    return ORDER_TIMEOUT_MINUTES * 60\n",
     "    minutes = (merchant or {}).get(\"timeout_minutes\", ORDER_TIMEOUT_MINUTES)\n"
     "    return minutes * 60\n"),
    ("2026-10-14T09:05:00", "bo", "Limit payment retries to 5 attempts", "shop/payments.py",
     "def retry_payment(card, amount, attempts=3):\n",
     "def retry_payment(card, amount, attempts=3):\n    attempts = min(attempts, 5)\n"),
    ("2026-10-22T17:30:00", "ada", "Round invoice totals to cents", "shop/invoice.py",
     "    return subtotal + tax\n", "    return round(subtotal + tax, 2)\n"),
    ("2026-11-03T10:40:00", "chen", "Cancel expired orders in batches", "shop/orders.py",
     "    for order in orders:\n", "    for order in orders[:500]:\n"),
    ("2026-11-12T15:00:00", "dana", "Token check allows 30 s of clock skew", "shop/auth.py",
     '    return bool(token) and token.get("expires", 0) > now\n',
     '    return bool(token) and token.get("expires", 0) + 30 > now\n'),
    ("2026-11-18T09:00:00", "bo", "Delivery estimate skips weekends", "shop/shipping.py",
     "    return sent + datetime.timedelta(days=3)\n",
     "    days = 5 if sent.weekday() >= 2 else 3\n"
     "    return sent + datetime.timedelta(days=days)\n"),
]  # fmt: skip
"""(author date, author, subject, file, old text, new text), oldest first."""

INITIAL_COMMIT = ("2026-06-02T09:00:00", "ada", "Initial shop service")
"""Date, author and subject of the first commit."""


def _commit(root: Path, date: str, who: str, message: str) -> str:
    name, email = AUTHORS[who]
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_AUTHOR_DATE": f"{date}+00:00",
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
        "GIT_COMMITTER_DATE": f"{date}+00:00",
    }
    git = ["git", "-C", str(root), "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "add", "-A"], check=True, env=env)
    subprocess.run([*git, "commit", "-q", "-m", message], check=True, env=env)
    out = subprocess.run([*git, "rev-parse", "--short=7", "HEAD"], check=True, env=env,
                         capture_output=True, text=True)  # fmt: skip
    return out.stdout.strip()


def build(root: Path) -> dict[str, str]:
    """Build the repository at ``root`` (replacing it); subject -> short hash of each commit."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    for path, text in INITIAL.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, "utf-8")
    hashes = {INITIAL_COMMIT[2]: _commit(root, *INITIAL_COMMIT)}
    for date, who, subject, path, old, new in COMMITS:
        text = (root / path).read_text("utf-8")
        if old not in text:
            raise RuntimeError(f"commit {subject!r}: {path} does not contain the text it edits")
        (root / path).write_text(text.replace(old, new, 1), "utf-8")
        hashes[subject] = _commit(root, date, who, subject)
    return hashes


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/.cache/history-repo")
    for subject, short in build(target).items():
        print(short, subject)
