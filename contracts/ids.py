"""The widths of the numbers the game stores: every id is a Postgres bigint, turn numbers and
limits are integers. The database checks values against them before a query (db.bounds), and a
face bounds what a request may name by them, so a hostile value (2**64) is refused up front."""

BIGINT_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

# Discord's shard of a server: (id >> SHARD_SHIFT) % shard count, the bits below a snowflake's
# timestamp shifted out. The bot computes it in Python, the database in SQL (db.claims).
SHARD_SHIFT = 22
