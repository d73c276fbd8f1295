"""The Logstash configuration: it parses (mustache, github.com/breml/logstash-config),
its pipelines are wired together, and the regexes it cannot take from the pattern file
are the pattern file's."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from corpus.tools_required import installed
from support import conf_regexes

from hvdlog.elastic.logstash_conf import GENERATED_LINE, render_native_conf
from hvdlog.fields import DATASETS, LEVELS
from hvdlog.parse.patterns import load_definitions

LOGSTASH = Path(__file__).resolve().parents[2] / "logstash"
CONFS = sorted((LOGSTASH / "pipeline").glob("*.conf"))
NATIVE_SCRIPT = LOGSTASH / "pipeline" / "horovod_native.rb"
# the ruby filter's parts, read into its context by horovod_native.rb (one per hvdlog/parse module)
NATIVE_PARTS = sorted((LOGSTASH / "pipeline" / "horovod_native").glob("*.rb"))
PIPELINES = yaml.safe_load((LOGSTASH / "pipelines.yml").read_text(encoding="utf-8"))


@pytest.fixture(name="mustache", scope="module")
def fixture_mustache() -> str:
    """The mustache binary that scripts/install-mustache.sh built."""
    return installed("HVDLOG_MUSTACHE", "mustache", "install-mustache.sh")


@pytest.mark.tools
@pytest.mark.jvm
class TestMustache:
    @pytest.mark.parametrize("command", ["check", "lint"])
    def test_every_conf_passes(self, mustache: str, command: str) -> None:
        """`mustache check` parses every pipeline; `mustache lint` finds every plugin has an id."""
        result = subprocess.run([mustache, command, *map(str, CONFS)], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout + result.stderr

    def test_mustache_rejects_a_broken_conf(self, mustache: str, tmp_path: Path) -> None:
        """The check can fail: a missing brace is reported."""
        broken = tmp_path / "broken.conf"
        broken.write_text(CONFS[0].read_text(encoding="utf-8").rstrip().removesuffix("}"), encoding="utf-8")
        result = subprocess.run([mustache, "check", str(broken)], capture_output=True, text=True, check=False)
        assert result.returncode != 0


class TestPipelines:
    def test_each_pipeline_has_its_conf(self) -> None:
        """pipelines.yml names one conf per pipeline, and every conf is used."""
        used = {Path(pipeline["path.config"]).name for pipeline in PIPELINES}
        assert used == {conf.name for conf in CONFS}

    def test_queues(self) -> None:
        """Every pipeline has a persistent queue; every pipeline that writes to ES a DLQ, which the
        dead-letter pipeline reads back (it has none itself: it would read its own rejects)."""
        read_back = set(re.findall(r'pipeline_id => "([^"]+)"', (LOGSTASH / "pipeline" / "dead-letter.conf").read_text(encoding="utf-8")))
        with_dlq = set()
        for pipeline in PIPELINES:
            assert pipeline["queue.type"] == "persisted", pipeline["pipeline.id"]
            writes = "elasticsearch {" in (LOGSTASH / "pipeline" / Path(pipeline["path.config"]).name).read_text()
            expected = writes and pipeline["pipeline.id"] != "dead-letter"
            assert pipeline.get("dead_letter_queue.enable", False) == expected, pipeline["pipeline.id"]
            if expected:
                with_dlq.add(pipeline["pipeline.id"])
        assert read_back == with_dlq

    def test_distributor_addresses_exist(self) -> None:
        """Every address the distributor sends to is some pipeline's input address."""
        text = {conf.name: conf.read_text(encoding="utf-8") for conf in CONFS}
        sent = set(re.findall(r'send_to => \["([^"]+)"\]', text["distributor.conf"]))
        listening = {found for body in text.values() for found in re.findall(r'address => "([^"]+)"', body)}
        assert sent and sent == listening

    def test_data_stream_datasets_are_declared(self) -> None:
        """The datasets the outputs and filters name are the contract's datasets."""
        named = {found for conf in CONFS for found in re.findall(r'"(horovod\.[a-z]+)"', conf.read_text(encoding="utf-8"))}
        assert named and named <= set(DATASETS)


class TestOneSourceOfPatterns:
    def test_grok_references_exist(self) -> None:
        """Every %{NAME} the confs use is defined in hvdlog/parse/assets/patterns/horovod."""
        definitions = load_definitions()
        used = {name for conf in CONFS for name in re.findall(r"%\{(\w+)", conf.read_text(encoding="utf-8"))}
        assert used and used <= set(definitions)

    def test_ruby_script_compiles_defined_patterns(self) -> None:
        """The ruby script compiles only patterns of the pattern file."""
        script = "\n".join(path.read_text(encoding="utf-8") for path in [NATIVE_SCRIPT, *NATIVE_PARTS])
        used = set(re.findall(r'compile\("(\w+)"\)', script))
        assert used and used <= set(load_definitions())

    def test_tag_gsubs_are_the_pattern_file(self) -> None:
        """The tag-, prefix-, progress- and arrival-time-removing gsub regexes (gsub cannot use %{})
        equal the pattern file's; only the progress one puts something back (the tag, group 1)."""
        definitions = load_definitions()
        native = (LOGSTASH / "pipeline" / "horovod-native.conf").read_text(encoding="utf-8")
        replaced = dict(re.findall(r'"message", "([^"]+)", "([^"]*)"', native))
        assert {regex: by for regex, by in replaced.items() if by} == {conf_regexes.PROGRESS: "\\1"}
        gsubs = set(replaced)
        time = definitions["HOROVOD_LAUNCHER_TIME"]
        prefix = conf_regexes.LINE_PREFIX
        assert gsubs == {
            f"^{prefix}(?:{time})?{definitions['HOROVOD_OPENMPI_TAG_ANY']}",
            definitions["HOROVOD_OPENMPI_TAG_ANY"],
            f"^{prefix}(?:{time})?{definitions['HOROVOD_GLOO_TAG_ANY']}",
            f"^{prefix}{definitions['HOROVOD_MPICH_TAG_ANY']}",
            definitions["HVDLOG_ARRIVAL_PREFIX_ANY"],
            conf_regexes.COLLECTOR_PREFIXES,
            f"^{prefix}{definitions['HOROVOD_SRUN_TAG_ANY']}",
            definitions["HOROVOD_ANSI_ANY"],
            conf_regexes.PROGRESS,
            # untagged: a scheduler's prefix before a core header (HOROVOD_PREFIXED_CORE, expanded)
            f"^{definitions['HOROVOD_PREFIX_NOT_CORE']}(?:{definitions['HOROVOD_SCHEDULER_PREFIX']}){definitions['HOROVOD_PREFIXED_START']}",
        }


    def test_gsubs_are_generated(self) -> None:
        """The committed conf is what `python -m hvdlog.elastic.generate` writes: its gsub regexes
        from the pattern file, its first line saying so (edit the patterns, then regenerate)."""
        native = (LOGSTASH / "pipeline" / "horovod-native.conf").read_text(encoding="utf-8")
        assert native == render_native_conf(native), "stale: run python -m hvdlog.elastic.generate"
        assert native.splitlines()[0] == GENERATED_LINE

    def test_a_hand_edited_gsub_is_stale(self) -> None:
        """The check can fail: a regex edited in the conf alone differs from the generated one."""
        native = (LOGSTASH / "pipeline" / "horovod-native.conf").read_text(encoding="utf-8")
        edited = native.replace('"\\x1b\\[[0-9;?]*[A-Za-z]"', '"\\x1b\\[[0-9;]*[A-Za-z]"', 1)
        assert edited != native and render_native_conf(edited) == native

class TestRubyLayout:
    def test_parts_mirror_the_python_modules(self) -> None:
        """The ruby filter loads exactly the files of horovod_native/, and each is named after the
        hvdlog/parse module that does the same step (a new step goes in both, under one name)."""
        listed = re.search(r"HOROVOD_NATIVE_PARTS = %w\[([^\]]*)\]", NATIVE_SCRIPT.read_text(encoding="utf-8"))
        assert listed, "horovod_native.rb must list its parts in HOROVOD_NATIVE_PARTS"
        assert sorted(listed.group(1).split()) == [part.stem for part in NATIVE_PARTS]
        python = {module.stem for module in (Path(__file__).resolve().parents[2] / "hvdlog" / "parse").glob("*.py")}
        assert {part.stem for part in NATIVE_PARTS} <= python


    def test_no_level_map_of_its_own(self) -> None:
        """The ruby filter maps level words through the message table's `levels` (as hvdlog parse
        does), never through a map of its own: no `"W" => "warning"` in any of its files."""
        levels = "|".join(LEVELS)
        copies = [(path.name, found) for path in [NATIVE_SCRIPT, *NATIVE_PARTS]
                  for found in re.findall(rf'"\w+" => "(?:{levels})"', path.read_text(encoding="utf-8"))]
        assert not copies
        assert "@levels.fetch(letter)" in "\n".join(path.read_text(encoding="utf-8") for path in NATIVE_PARTS)


class TestNativeOrder:
    """Issue 16's items 3 and 4, in horovod-native.conf."""

    NATIVE = (LOGSTASH / "pipeline" / "horovod-native.conf").read_text(encoding="utf-8")

    def test_blank_lines_are_dropped_after_prefixes_are_removed(self) -> None:
        """A tagged or stamped empty line (`[1,0]<stdout>:`) is blank only once its tag is off."""
        drop = self.NATIVE.index('id => "native_drop_blank"')
        for step in ("native_strip_arrival_time", "native_strip_openmpi_tags", "native_strip_gloo_tags", "native_strip_mpich_tags"):
            assert self.NATIVE.index(f'id => "{step}"') < drop, step

    def test_data_stream_fields_are_not_set(self) -> None:
        """The output alone picks the stream (auto-routing off, fixed dataset): the filters set no
        data_stream field, so no add_field can turn one into an array (an invalid index name)."""
        assert "[data_stream]" not in self.NATIVE


# --- the beats input with every documented .env value ------------------------------------------

ENV_EXAMPLE = LOGSTASH.parent / ".env.example"


def _documented_client_authentication() -> list[str]:
    """The values .env.example documents for BEATS_SSL_CLIENT_AUTHENTICATION (its `# Values:`
    line just above the setting), plus the value it sets."""
    text = ENV_EXAMPLE.read_text(encoding="utf-8")
    above = text[: text.index("\nBEATS_SSL_CLIENT_AUTHENTICATION=")].splitlines()
    values_line = next(line for line in reversed(above[-4:]) if line.startswith("# Values:"))
    offered = [re.match(r"\s*(\w+)", part)[1] for part in values_line.removeprefix("# Values:").split("|")]
    value = re.search(r"^BEATS_SSL_CLIENT_AUTHENTICATION=(\S*)", text, re.M)[1]
    return sorted({*offered, value})


def _rendered_beats_input(env: dict[str, str]) -> str:
    """distributor.conf with Logstash's `${VAR:default}` substitution done for ``env``."""
    text = (LOGSTASH / "pipeline" / "distributor.conf").read_text(encoding="utf-8")
    return re.sub(r"\$\{(\w+)(?::([^}]*))?\}", lambda m: env.get(m[1], m[2] or ""), text)


def beats_input_problems(conf: str) -> list[str]:
    """The beats input's own validation (logstash-input-beats 6.9, bundled with Logstash 8.19)
    applied to the first `beats { }` block: the rules that raise ConfigurationError at start."""
    block = re.search(r"\bbeats\s*\{(.*?)\n\s*\}", conf, re.S)
    assert block, "no beats input"
    settings = dict(re.findall(r'(\w+)\s*=>\s*\[?\s*"([^"]*)"', block[1]))
    problems = []
    auth = settings.get("ssl_client_authentication", "none")
    if auth not in ("none", "optional", "required"):
        problems.append(f"ssl_client_authentication must be none, optional or required, not {auth!r}")
    if settings.get("ssl_enabled", "false") == "true":
        if not settings.get("ssl_certificate") or not settings.get("ssl_key"):
            problems.append("ssl_enabled needs ssl_certificate and ssl_key")
        has_ca = bool(settings.get("ssl_certificate_authorities"))
        if has_ca and auth not in ("optional", "required"):
            problems.append("ssl_certificate_authorities is set but ssl_client_authentication is neither optional nor required")
        if auth in ("optional", "required") and not has_ca:
            problems.append("ssl_client_authentication needs ssl_certificate_authorities")
    return problems


class TestBeatsInputValues:
    def test_documented_values(self) -> None:
        """.env.example offers exactly `required` and `optional` (no `none`: issue 16)."""
        assert _documented_client_authentication() == ["optional", "required"]

    @pytest.mark.tools
    def test_every_documented_value_gives_a_valid_input(self, mustache: str, tmp_path: Path) -> None:
        """Each documented value, rendered into distributor.conf as compose passes it, parses
        (mustache check) and passes the beats input's validation rules."""
        for value in _documented_client_authentication():
            rendered = tmp_path / f"distributor-{value}.conf"
            rendered.write_text(_rendered_beats_input({"BEATS_SSL_CLIENT_AUTHENTICATION": value}), encoding="utf-8")
            result = subprocess.run([mustache, "check", str(rendered)], capture_output=True, text=True, check=False)
            assert result.returncode == 0, value + result.stdout + result.stderr
            assert beats_input_problems(rendered.read_text(encoding="utf-8")) == [], value

    def test_the_rules_can_fail(self) -> None:
        """`none` with the CA list (what .env.example used to offer) is refused by the same rules."""
        problems = beats_input_problems(_rendered_beats_input({"BEATS_SSL_CLIENT_AUTHENTICATION": "none"}))
        assert problems == ["ssl_certificate_authorities is set but ssl_client_authentication is neither optional nor required"]
