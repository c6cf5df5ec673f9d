"""the rule set of a refused text's audit entry (`<what>_refused`, details.rule_set) stored as a
code (`operator`, `server_filter`, `automod` with the AutoMod rule's own name in details.rule;
game.content_rules.rule_set_code) instead of its English name

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

NAMES = (("the operator''s rules", "operator"), ("this server''s filter", "server_filter"))
AUTOMOD = "this server''s AutoMod rule "
REFUSED = "action LIKE '%\\_refused'"


def upgrade() -> None:
    for name, code in NAMES:
        op.execute(f"UPDATE audit_log SET details = jsonb_set(details, '{{rule_set}}', '\"{code}\"') "
                   f"WHERE {REFUSED} AND details->>'rule_set' = '{name}'")
    op.execute(
        "UPDATE audit_log SET details = details || jsonb_build_object('rule_set', 'automod', "
        f"'rule', substr(details->>'rule_set', length('{AUTOMOD}') + 1)) "
        f"WHERE {REFUSED} AND starts_with(details->>'rule_set', '{AUTOMOD}')"
    )


def downgrade() -> None:
    op.execute(
        f"UPDATE audit_log SET details = (details - 'rule') || jsonb_build_object('rule_set', '{AUTOMOD}' || "
        f"coalesce(details->>'rule', '')) WHERE {REFUSED} AND details->>'rule_set' = 'automod'"
    )
    for name, code in NAMES:
        op.execute(f"UPDATE audit_log SET details = jsonb_set(details, '{{rule_set}}', to_jsonb('{name}'::text)) "
                   f"WHERE {REFUSED} AND details->>'rule_set' = '{code}'")
