"""Print the SQL that creates and fills the shop database of the mcp sandbox.

Deterministic: one seeded random generator (random.Random(2024)), no clock, so every build
writes the same rows. Run with python3 (Debian's); the output goes to psql.
"""

import random

rng = random.Random(2024)

CATEGORIES = [
    (1, "Kitchen", None), (2, "Garden", None), (3, "Office", None), (4, "Outdoor", None),
    (5, "Cookware", 1), (6, "Tableware", 1), (7, "Tools", 2), (8, "Plants", 2),
    (9, "Paper", 3), (10, "Desk", 3), (11, "Camping", 4), (12, "Cycling", 4),
]
SUPPLIERS = [
    (1, "Nordic Steelworks", "SE"), (2, "Atelier Lumen", "FR"), (3, "Greenleaf Growers", "NL"),
    (4, "Papierfabrik Weiss", "DE"), (5, "Trailhead Supply", "US"), (6, "Kaizen Tools", "JP"),
    (7, "Olive & Oak", "ES"), (8, "Velo Parts Co", "IT"),
]
PRODUCTS_BY_CATEGORY = {
    5: ["Cast Iron Skillet", "Stainless Saucepan", "Dutch Oven", "Wok", "Stock Pot"],
    6: ["Stoneware Plate", "Linen Napkins", "Glass Tumbler", "Serving Bowl", "Espresso Cup"],
    7: ["Pruning Shears", "Garden Trowel", "Hedge Trimmer", "Watering Can", "Rake"],
    8: ["Olive Tree", "Lavender Pot", "Fern", "Herb Kit", "Tomato Seedlings"],
    9: ["A5 Notebook", "Sketch Pad", "Envelopes", "Sticky Notes", "Letter Paper"],
    10: ["Desk Lamp", "Monitor Stand", "Pen Holder", "Desk Mat", "Cable Tray"],
    11: ["Two-Person Tent", "Sleeping Bag", "Camp Stove", "Head Torch", "Water Filter"],
    12: ["Bike Lights", "Saddle Bag", "Mini Pump", "Bike Lock", "Cycling Gloves"],
}
SUPPLIER_BY_CATEGORY = {5: 1, 6: 2, 7: 6, 8: 3, 9: 4, 10: 2, 11: 5, 12: 8}
FIRST = ["Alice", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ines", "Jonas",
         "Keiko", "Liam", "Marta", "Nadia", "Oscar", "Priya", "Quentin", "Rosa", "Sven", "Tariq"]
LAST = ["Martin", "Schmidt", "Rossi", "Garcia", "Novak", "Jensen", "Dubois", "Silva", "Kowalski",
        "Nakamura", "Okafor", "Larsen", "Moreau", "Fischer", "Costa"]
CITIES = [("Paris", "FR"), ("Lyon", "FR"), ("Berlin", "DE"), ("Hamburg", "DE"), ("Madrid", "ES"),
          ("Rome", "IT"), ("Amsterdam", "NL"), ("Stockholm", "SE"), ("London", "GB"),
          ("Dublin", "IE"), ("Lisbon", "PT"), ("Vienna", "AT")]
STATUSES = ["pending", "paid", "shipped", "delivered", "delivered", "delivered", "cancelled"]
REVIEW_TITLES = {1: "Disappointing", 2: "Not great", 3: "Does the job", 4: "Very good",
                 5: "Excellent"}


def q(value: object) -> str:
    """SQL literal of a Python value."""
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def insert(table: str, columns: str, rows: list[tuple]) -> None:
    """Print one multi-row INSERT."""
    print(f"INSERT INTO {table} ({columns}) VALUES")
    print(",\n".join("  (" + ", ".join(q(v) for v in row) + ")" for row in rows) + ";")


def day(offset: int) -> str:
    """A date ``offset`` days after 2023-01-01, as ISO text (no clock involved)."""
    import datetime

    return (datetime.date(2023, 1, 1) + datetime.timedelta(days=offset)).isoformat()


print("""BEGIN;
CREATE TABLE categories (
  id integer PRIMARY KEY,
  name text NOT NULL UNIQUE,
  parent_id integer REFERENCES categories(id)
);
CREATE TABLE suppliers (
  id integer PRIMARY KEY,
  name text NOT NULL,
  country char(2) NOT NULL,
  email text NOT NULL UNIQUE
);
CREATE TABLE products (
  id integer PRIMARY KEY,
  sku text NOT NULL UNIQUE,
  name text NOT NULL,
  category_id integer NOT NULL REFERENCES categories(id),
  supplier_id integer NOT NULL REFERENCES suppliers(id),
  price numeric(10, 2) NOT NULL CHECK (price > 0),
  stock integer NOT NULL CHECK (stock >= 0)
);
CREATE TABLE customers (
  id integer PRIMARY KEY,
  first_name text NOT NULL,
  last_name text NOT NULL,
  email text NOT NULL UNIQUE,
  city text NOT NULL,
  country char(2) NOT NULL,
  signed_up date NOT NULL
);
CREATE TABLE orders (
  id integer PRIMARY KEY,
  customer_id integer NOT NULL REFERENCES customers(id),
  ordered_on date NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'paid', 'shipped', 'delivered', 'cancelled'))
);
CREATE TABLE order_items (
  order_id integer NOT NULL REFERENCES orders(id),
  product_id integer NOT NULL REFERENCES products(id),
  quantity integer NOT NULL CHECK (quantity > 0),
  unit_price numeric(10, 2) NOT NULL,
  PRIMARY KEY (order_id, product_id)
);
CREATE TABLE reviews (
  id integer PRIMARY KEY,
  product_id integer NOT NULL REFERENCES products(id),
  customer_id integer NOT NULL REFERENCES customers(id),
  rating integer NOT NULL CHECK (rating BETWEEN 1 AND 5),
  title text NOT NULL,
  written_on date NOT NULL
);
CREATE INDEX orders_customer_id ON orders (customer_id);
CREATE INDEX order_items_product_id ON order_items (product_id);
CREATE INDEX reviews_product_id ON reviews (product_id);""")

insert("categories", "id, name, parent_id", CATEGORIES)
insert("suppliers", "id, name, country, email", [
    (i, name, country, name.lower().replace(" & ", "-").replace(" ", "-") + "@suppliers.example")
    for i, name, country in SUPPLIERS
])
products = []
for category, names in PRODUCTS_BY_CATEGORY.items():
    for name in names:
        pid = len(products) + 1
        price = round(rng.uniform(4, 180), 2)
        products.append((pid, f"SKU-{category:02d}{pid:03d}", name, category,
                         SUPPLIER_BY_CATEGORY[category], f"{price:.2f}", rng.randint(0, 250)))
insert("products", "id, sku, name, category_id, supplier_id, price, stock", products)
customers = []
emails = set()
for cid in range(1, 121):
    first, last = rng.choice(FIRST), rng.choice(LAST)
    city, country = rng.choice(CITIES)
    email = f"{first}.{last}{cid}@mail.example".lower()
    emails.add(email)
    customers.append((cid, first, last, email, city, country, day(rng.randint(0, 364))))
insert("customers", "id, first_name, last_name, email, city, country, signed_up", customers)
orders, items = [], []
for oid in range(1, 301):
    customer = rng.randint(1, 120)
    orders.append((oid, customer, day(365 + rng.randint(0, 320)), rng.choice(STATUSES)))
    for product in sorted(rng.sample(range(1, len(products) + 1), rng.randint(1, 4))):
        items.append((oid, product, rng.randint(1, 3), products[product - 1][5]))
insert("orders", "id, customer_id, ordered_on, status", orders)
insert("order_items", "order_id, product_id, quantity, unit_price", items)
reviews = []
for rid in range(1, 151):
    rating = rng.choice([1, 2, 3, 3, 4, 4, 4, 5, 5, 5])
    reviews.append((rid, rng.randint(1, len(products)), rng.randint(1, 120), rating,
                    REVIEW_TITLES[rating], day(400 + rng.randint(0, 300))))
insert("reviews", "id, product_id, customer_id, rating, title, written_on", reviews)
print("COMMIT;")
