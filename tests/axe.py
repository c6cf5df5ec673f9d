"""axe-core in a test's Chromium page: the WCAG 2 A/AA rules and axe's best practices.

`violations(page)` injects the axe.min.js that axe-playwright-python bundles and returns one line per
violated rule ("id (impact): N nodes: selectors"), so a failing assert shows what to mend.
"""

from __future__ import annotations

from axe_playwright_python.async_playwright import Axe

TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]


async def violations(page) -> list[str]:
    results = await Axe().run(page, options={"runOnly": {"type": "tag", "values": TAGS},
                                             "resultTypes": ["violations"]})
    return [f"{v['id']} ({v['impact']}): {len(v['nodes'])} nodes: "
            + "; ".join(" ".join(map(str, n.get("target", []))) for n in v["nodes"][:5])
            for v in results.response["violations"]]
