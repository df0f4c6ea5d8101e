"""The code cites docs/domain.md (the domain reference: causes, message versions, alert and sizing rules, cards);
each citation must lead somewhere. The file was cited in ten modules while it lived outside the repository; a
citation that names a section ("Telling the causes apart") must name one of its headings."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
DOMAIN = ROOT / "docs" / "domain.md"
# `docs/domain.md "Section"` or `docs/domain.md, "Section"`: the section a comment points a reader at
SECTION = re.compile(r'docs/domain\.md,? "([^"]+)"')


def _sources() -> list[Path]:
    return [*sorted((ROOT / "pipeline").rglob("*.py")), *sorted((ROOT / "sql").rglob("*.sql"))]


def test_every_citation_of_the_domain_reference_leads_to_it() -> None:
    headings = {line.lstrip("#").strip() for line in DOMAIN.read_text().splitlines() if line.startswith("#")}
    citing = {}
    for path in _sources():
        text = path.read_text()
        assert not re.search(r"(?<![/\w])domain\.md", text), f"{path}: cite docs/domain.md, the file in the repository"
        if "docs/domain.md" in text:
            citing[path.name] = SECTION.findall(text)
    assert len(citing) >= 10
    named = {section for sections in citing.values() for section in sections}
    assert named and named <= headings, named - headings
