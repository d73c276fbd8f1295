"""Put the ILM policy, templates and data streams on an Elasticsearch 8 cluster, idempotently.

Each object is read first and written only when it differs from what we would write, so
a second run reports ``unchanged`` for everything and changes nothing. Clusters without
ILM (or without the data stream API) get everything else plus a ``skipped`` step that
says what is missing: indexing works there, retention does not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from hvdlog.elastic import connection, templates
from hvdlog.fields import DATASETS

if TYPE_CHECKING:
    from elasticsearch import Elasticsearch

__all__ = ["MIN_PASSWORD_LENGTH", "WELL_KNOWN_PASSWORDS", "ElasticsearchInstaller", "Outcome", "SetupError", "Step", "es_errors", "password_problem"]

Outcome = Literal["created", "updated", "unchanged", "skipped"]

#: Privileges the installing user needs; named in the 403 message.
_PRIVILEGES = "cluster privileges manage_index_templates and manage_ilm, and create_index on logs-horovod.*-*"


#: Passwords refused by both installers: ``hvdlog install`` and the compose ``setup`` service
#: (setup/setup.sh's ``WELL_KNOWN``; tests/elastic/test_one_installer.py keeps the two equal).
WELL_KNOWN_PASSWORDS: Final = frozenset((
    "changeme", "change_me", "changeit", "elastic", "elasticsearch", "kibana", "kibana_system", "logstash", "logstash_internal",
    "password", "passw0rd", "secret", "admin", "root", "123456", "12345678", "123456789", "qwerty", "letmein", "hvdlog", "horovod", "test",
))
MIN_PASSWORD_LENGTH: Final = 12


def password_problem(name: str, value: str | None) -> str | None:
    """Why ``value`` is refused as a password (setup.sh's rule exactly: empty, well known, short), or None."""
    folded = "".join((value or "").lower().split())
    if not folded:
        return f"{name} is empty"
    if folded in WELL_KNOWN_PASSWORDS:
        return f"{name} is a well-known password: choose another"
    if len(value or "") < MIN_PASSWORD_LENGTH:
        return f"{name} is shorter than {MIN_PASSWORD_LENGTH} characters"
    return None


class SetupError(Exception):
    """A failure the user can fix; the message is one sentence saying what to check."""


@dataclass(frozen=True, slots=True)
class Step:
    """What happened to one object."""

    what: str
    outcome: Outcome
    note: str = ""


def _error_text(body: Any) -> str:
    """The reason in an Elasticsearch error body (``{"error": {"reason": ...}}`` or ``{"error": "..."}``)."""
    error = body.get("error", body) if isinstance(body, Mapping) else body
    if isinstance(error, Mapping):
        return str(error.get("reason") or error.get("type") or error)
    return str(error)


@contextmanager
def es_errors(url: str, doing: str) -> Iterator[None]:
    """Turn client exceptions into :class:`SetupError` sentences (the map is :func:`connection.describe`)."""
    try:
        with connection.errors(url, doing, privileges=_PRIVILEGES):
            yield
    except connection.ElasticsearchError as exc:
        raise SetupError(str(exc)) from exc


def _missing_api(body: Any) -> bool:
    """True when an error body says the REST endpoint itself does not exist (module not installed)."""
    text = _error_text(body)
    return "no handler found" in text or "Incorrect HTTP method" in text


def _flat_settings(settings: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"index": {"number_of_replicas": 0}}`` and ``{"number_of_replicas": "0"}`` both -> ``{"index.number_of_replicas": "0"}``."""
    flat: dict[str, str] = {}
    for key, value in settings.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flat_settings(value, f"{name}."))
        else:
            flat[name if name.startswith("index.") else f"index.{name}"] = str(value).lower() if isinstance(value, bool) else str(value)
    return flat


#: Keys the server adds to a stored template (9.x stamps every template it stores), never ours.
_SERVER_STAMPS: Final = frozenset(("created_date_millis", "modified_date_millis", "created_date", "modified_date"))


def _canonical(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body with its settings flattened, so stored and desired compare equal when they mean the same."""
    result = {key: value for key, value in body.items() if key not in _SERVER_STAMPS}
    template = result.get("template")
    if isinstance(template, Mapping) and "settings" in template:
        result["template"] = {**template, "settings": _flat_settings(template["settings"])}
    return result


#: The Elasticsearch majors hvdlog installs into and queries, both tested on real servers:
#: the 8.x client (compatible-with=8 headers) talks to 9.x, measured on 9.2.0.
SUPPORTED_MAJORS: Final = ("8", "9")


class ElasticsearchInstaller:
    """Installs our objects through one elasticsearch-py 8 client; every call maps errors to sentences."""

    def __init__(self, client: Elasticsearch, url: str) -> None:
        self.client = client
        #: Credentials masked: this goes into messages.
        self.url = connection.mask_credentials(url)

    def _request(self, method: str, path: str, doing: str, body: Any = None, ok: tuple[int, ...] = ()) -> tuple[int, Any]:
        """One REST call; statuses in ``ok`` come back instead of raising."""
        headers = {"accept": "application/json"}
        if body is not None:
            headers["content-type"] = "application/json"
        client = self.client.options(ignore_status=list(ok)) if ok else self.client
        with es_errors(self.url, doing):
            response = client.perform_request(method, path, headers=headers, body=body)
        return response.meta.status, response.body

    def version(self) -> str:
        """The node's version; anything but 8.x or 9.x is refused (``GET /`` may be absent, so ask the nodes API)."""
        _, body = self._request("GET", "/_nodes/_local?filter_path=nodes.*.version", "reading the version")
        versions = [node.get("version", "") for node in (body or {}).get("nodes", {}).values()]
        if not versions:
            raise SetupError(f"Elasticsearch at {self.url} did not report its version; is this an Elasticsearch node?")
        version = str(versions[0])
        if version.split(".")[0] not in SUPPORTED_MAJORS:
            raise SetupError(f"Elasticsearch at {self.url} is version {version}; hvdlog's templates and client need 8.x or 9.x.")
        return version

    def ilm_available(self) -> bool:
        """Whether the ILM API exists here (it does not in an OSS-like or integ-test build)."""
        status, body = self._request("GET", f"/_ilm/policy/{templates.ILM_POLICY}", "reading the ILM policy", ok=(400, 404, 405))
        if status in (400, 405):
            return False
        if status == 404:
            error = body.get("error") if isinstance(body, Mapping) else None
            return isinstance(error, Mapping) and error.get("type") == "resource_not_found_exception"
        return True

    def _put_if_changed(
        self, what: str, path: str, desired: dict[str, Any], current: Callable[[Any], Any]
    ) -> Step:
        """GET ``path``; PUT ``desired`` only when the stored object differs (compared canonically)."""
        status, body = self._request("GET", path, f"reading {what}", ok=(404,))
        stored = current(body) if status == 200 else None
        if stored is not None and _canonical(stored) == _canonical(desired):
            return Step(what, "unchanged")
        self._request("PUT", path, f"writing {what}", body=desired)
        return Step(what, "created" if stored is None else "updated")

    def install(
        self,
        namespace: str = templates.DEFAULT_NAMESPACE,
        replicas: int = templates.DEFAULT_REPLICAS,
        retention_days: int = templates.DEFAULT_RETENTION_DAYS,
    ) -> Iterator[Step]:
        """Yield one :class:`Step` per object, in dependency order: policy, components, template, streams."""
        templates.validate_namespace(namespace)
        has_ilm = self.ilm_available()
        policy_what = f"ILM policy {templates.ILM_POLICY}"
        if has_ilm:
            yield self._put_if_changed(
                policy_what,
                f"/_ilm/policy/{templates.ILM_POLICY}",
                templates.ilm_policy(retention_days),
                lambda body: {"policy": body[templates.ILM_POLICY]["policy"]},
            )
        else:
            yield Step(policy_what, "skipped", f"this Elasticsearch has no ILM API: nothing deletes data after {retention_days} days")
        for name, body in templates.component_templates(replicas).items():
            what = f"component template {name}"
            if name == templates.COMPONENT_LIFECYCLE and not has_ilm:
                yield Step(what, "skipped", "needs ILM (index.lifecycle.name is unknown without it)")
                continue
            yield self._put_if_changed(
                what, f"/_component_template/{name}", body, lambda stored: stored["component_templates"][0]["component_template"]
            )
        yield self._put_if_changed(
            f"index template {templates.INDEX_TEMPLATE}",
            f"/_index_template/{templates.INDEX_TEMPLATE}",
            templates.index_template(),
            lambda stored: stored["index_templates"][0]["index_template"],
        )
        for dataset in DATASETS:
            yield self._data_stream(templates.data_stream_name(dataset, namespace))

    def _data_stream(self, name: str) -> Step:
        """Create the data stream unless it exists; without the data stream API, the first write creates it."""
        what = f"data stream {name}"
        status, body = self._request("GET", f"/_data_stream/{name}", f"looking up {what}", ok=(400, 404, 405))
        if status == 200 and any(stream.get("name") == name for stream in body.get("data_streams", [])):
            return Step(what, "unchanged")
        if status in (400, 405) or (status == 404 and _missing_api(body)):
            # Without the API a stream still exists once written to; _resolve is core and tells.
            _, resolved = self._request("GET", f"/_resolve/index/{name}", f"looking up {what}", ok=(404,))
            if any(stream.get("name") == name for stream in resolved.get("data_streams", [])):
                return Step(what, "unchanged")
            return Step(what, "skipped", "no data stream API here: the first write creates it from the template")
        self._request("PUT", f"/_data_stream/{name}", f"creating {what}")
        return Step(what, "created")
