"""Every field the pipelines and `hvdlog parse` write exists in the field contract
(hvdlog/fields.py), with a value of the contract's type."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from corpus.cases import cases

from hvdlog.documents import flatten
from hvdlog.fields import EXTRA, FIELDS_BY_NAME
from hvdlog.parse.messages import MESSAGES_FILE
from hvdlog.parse.patterns import compile_pattern, field_path, load_definitions

LOGSTASH = Path(__file__).resolve().parents[2] / "logstash"
SOURCES = [*sorted((LOGSTASH / "pipeline").glob("*.conf")), LOGSTASH / "pipeline" / "horovod_native.rb",
           *sorted((LOGSTASH / "pipeline" / "horovod_native").glob("*.rb"))]
FIELD_REF = re.compile(r"(?<![\w\]])((?:\[[@\w.]+\])+)")
TYPES: dict[str, tuple[type, ...]] = {
    "keyword": (str,), "text": (str,), "date": (str,), "integer": (int,), "long": (int,),
    "double": (float, int), "float": (float, int), "boolean": (bool,), "flattened": (dict,),
}


def _removed(text: str) -> set[str]:
    """Fields a conf removes: shipper bookkeeping that never reaches Elasticsearch."""
    return {field_path(ref) if ref.startswith("[") else ref
            for block in re.findall(r"remove_field => \[([^\]]*(?:\][^\]]*)*?)\]\s*$", text, re.MULTILINE)
            for ref in re.findall(r'"([^"]+)"', block)}


def _written_fields() -> dict[str, str]:
    """Dotted field -> where it is written, from the confs, the ruby script and grok."""
    written: dict[str, str] = {}
    for source in SOURCES:
        text = source.read_text(encoding="utf-8")
        removed = _removed(text)
        # the ruby script names fields in strings only (`[event]` there is an array literal)
        # gsub regexes are not field references (`[FP]` in a character class)
        conf = re.sub(r'gsub => \["message", "[^"]*"', "", text)
        refs = re.findall(r'"((?:\[[@\w.]+\])+)"', text) if source.suffix == ".rb" else FIELD_REF.findall(conf)
        for ref in refs:
            name = field_path(ref)
            if not name.startswith("@metadata") and name not in removed:
                written.setdefault(name, source.name)
        for name in re.findall(r'"((?:message|rank|size|tags))"', text):
            written.setdefault(name, source.name)
    used = {name for source in SOURCES for name in re.findall(r'%\{(\w+)\}|compile\("(\w+)"\)', source.read_text())
            for name in name if name}
    for row in json.loads(MESSAGES_FILE.read_text(encoding="utf-8"))["messages"]:  # the message table
        used.add(row["pattern"])
        for name in row.get("fields", {}):
            written.setdefault(name, "messages.json")
    for name in used & set(load_definitions()):
        for capture in compile_pattern(name).captures:
            if not capture.field.startswith("@metadata"):
                written.setdefault(capture.field, f"grok {name}")
    return written


class TestPipelinesWriteContractFields:
    def test_every_written_field_is_declared(self) -> None:
        """No conf, ruby line or grok capture writes a field the contract does not declare."""
        written = _written_fields()
        assert {"log.origin.file.line", "horovod.stall.missing_ranks", "error.stack_trace"} <= set(written)
        undeclared = {name: where for name, where in written.items() if name not in FIELDS_BY_NAME}
        assert not undeclared, f"declare these in hvdlog/fields.py: {undeclared}"

    @pytest.mark.parametrize("pattern", sorted(load_definitions()))
    def test_grok_conversions_match_contract_types(self, pattern: str) -> None:
        """A capture converted to int lands in an integer field, to float in a double."""
        for capture in compile_pattern(pattern).captures:
            if capture.field.startswith("@metadata"):
                continue
            declared = FIELDS_BY_NAME[capture.field].type
            expected = {int: ("integer", "long"), float: ("double", "float")}.get(capture.convert, ("keyword", "text", "date"))
            assert declared in expected, (capture.field, declared)


def _check_value(name: str, value: Any) -> None:
    field = FIELDS_BY_NAME.get(name)
    assert field is not None, f"{name} is not in the field contract"
    values = value if isinstance(value, list) and field.type != "flattened" else [value]
    for item in values:
        allowed = TYPES[field.type]
        ok = isinstance(item, allowed) and not (isinstance(item, bool) and bool not in allowed)
        assert ok, f"{name}: {item!r} is not a {field.type}"


class TestGoldenDocumentsFollowTheContract:
    @pytest.mark.parametrize("case", cases(), ids=lambda case: case.id)
    def test_every_leaf_is_declared_with_its_type(self, case) -> None:
        """Every field of every golden document is declared, and its value has the declared type."""
        for doc in case.expected():
            for name, value in flatten(doc):
                _check_value(name, value)
            assert doc["event"]["dataset"] and doc["log"]["level"]

    def test_extra_is_one_leaf(self) -> None:
        """Undeclared keys live under the flattened catch-all, checked as one value."""
        _check_value(EXTRA, {"accuracy": 0.91})
        with pytest.raises(AssertionError):
            _check_value("horovod.stall.missing_ranks", ["1"])
