"""hvdlog.fields: the contract is consistent, and docs/fields.md is generated from it."""

from __future__ import annotations

from pathlib import Path

from hvdlog.elastic.generate import FIELDS_DOC, generated_files, sample_events
from hvdlog.fields import FIELDS, FIELDS_BY_NAME

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / FIELDS_DOC

ES_TYPES = {"date", "text", "keyword", "long", "integer", "double", "boolean", "flattened"}


class TestContract:
    def test_names_unique_and_types_known(self) -> None:
        """Each field is declared once, with an Elasticsearch type the templates can map."""
        assert len(FIELDS_BY_NAME) == len(FIELDS)
        assert {f.type for f in FIELDS} <= ES_TYPES

    def test_no_field_is_also_an_object(self) -> None:
        """No declared leaf is the parent of another (ES could not map both)."""
        names = set(FIELDS_BY_NAME)
        assert not [n for n in names if any(other.startswith(n + ".") for other in names)]

    def test_user_vocabulary_is_top_level(self) -> None:
        """rank, local_rank and step keep their exact names, as integers."""
        assert FIELDS_BY_NAME["rank"].type == FIELDS_BY_NAME["local_rank"].type == "integer"
        assert FIELDS_BY_NAME["step"].type == "long"


def test_docs_fields_md_is_fresh() -> None:
    """docs/fields.md equals what `python -m hvdlog.elastic.generate` renders now."""
    assert DOC.read_text() == generated_files(REPO)[FIELDS_DOC], "stale: run `python -m hvdlog.elastic.generate`"


def test_one_sample_per_dataset() -> None:
    """Every dataset has a golden sample event to show in the docs."""
    from hvdlog.fields import DATASETS

    assert set(sample_events(REPO / "tests" / "corpus")) == set(DATASETS)
