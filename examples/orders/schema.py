"""The order database's schema: SQLAlchemy 2 models and the covering index of S6.3.

Customers with their profiles, products, orders with their lines, and the ``seed_info`` row
that says what was seeded (``orders.seeding`` fills them; ``orders.db`` opens and prepares
a database). The covering index (``ix_orders_customer_cover``: customer, date, and the
columns the queries read) is never made by ``create_all``: ``orders.db`` makes it where a
configuration asks for it.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from sqlalchemy import DateTime, ForeignKey, Index, Integer, String, Table
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

__all__ = [
    "AS_OF",
    "COVERING_INDEX",
    "HISTORY_DAYS",
    "SCHEMA_VERSION",
    "Base",
    "Customer",
    "Order",
    "OrderLine",
    "Product",
    "Profile",
    "SeedInfo",
    "covering",
]

SCHEMA_VERSION = 2
AS_OF = datetime(2026, 1, 1)
"""The seeded history ends here; analysis windows count back from it."""
HISTORY_DAYS = 730
COVERING_INDEX = "ix_orders_customer_cover"


class Base(DeclarativeBase):
    __table__: ClassVar[Table]
    """Each model here maps one plain table (SQLAlchemy types it as any ``FromClause``)."""


class Customer(Base):
    __tablename__ = "customers"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(80))
    email: Mapped[str] = mapped_column(String(120))
    region: Mapped[str] = mapped_column(String(16))
    segment: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime)


class Profile(Base):
    __tablename__ = "profiles"
    customer_id: Mapped[int] = mapped_column(
        ForeignKey("customers.id"), primary_key=True, autoincrement=False
    )
    tier: Mapped[str] = mapped_column(String(16))
    preferred_categories: Mapped[str] = mapped_column(String(120))
    marketing_opt_in: Mapped[int] = mapped_column(Integer)
    credit_limit_cents: Mapped[int] = mapped_column(Integer)
    notes: Mapped[str] = mapped_column(String(400))
    order_count: Mapped[int] = mapped_column(Integer)
    """Kept with every order (seeding, ``create_order``): a profile read is one row."""
    spend_cents: Mapped[int] = mapped_column(Integer)
    last_order_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


class Product(Base):
    __tablename__ = "products"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(80))
    category: Mapped[str] = mapped_column(String(24))
    price_cents: Mapped[int] = mapped_column(Integer)
    description: Mapped[str] = mapped_column(String(400))


class Order(Base):
    """One order. ``customer_id`` has no foreign key on purpose: MariaDB would index it."""

    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    customer_id: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    status: Mapped[str] = mapped_column(String(12))
    channel: Mapped[str] = mapped_column(String(12))
    currency: Mapped[str] = mapped_column(String(3))
    item_count: Mapped[int] = mapped_column(Integer)
    subtotal_cents: Mapped[int] = mapped_column(Integer)
    shipping_cents: Mapped[int] = mapped_column(Integer)
    tax_cents: Mapped[int] = mapped_column(Integer)
    total_cents: Mapped[int] = mapped_column(Integer)
    warehouse: Mapped[str] = mapped_column(String(8))
    risk_score: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(DateTime)
    lines: Mapped[list[OrderLine]] = relationship(back_populates="order", order_by="OrderLine.id")


class OrderLine(Base):
    __tablename__ = "order_lines"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), index=True)
    product_id: Mapped[int] = mapped_column(ForeignKey("products.id"))
    quantity: Mapped[int] = mapped_column(Integer)
    unit_price_cents: Mapped[int] = mapped_column(Integer)
    discount_cents: Mapped[int] = mapped_column(Integer)
    order: Mapped[Order] = relationship(back_populates="lines")
    product: Mapped[Product] = relationship(lazy="joined")


class SeedInfo(Base):
    """What was seeded: a database is reused while this row matches the request."""

    __tablename__ = "seed_info"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    version: Mapped[int] = mapped_column(Integer)
    orders: Mapped[int] = mapped_column(Integer)
    customers: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(Integer)
    seconds_ms: Mapped[int] = mapped_column(Integer)


covering = Index(
    COVERING_INDEX,
    Order.customer_id,
    Order.created_at,
    Order.status,
    Order.total_cents,
    Order.item_count,
)
Order.__table__.indexes.discard(covering)  # created on demand, never by create_all
