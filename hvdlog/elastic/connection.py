"""The one way hvdlog talks to Elasticsearch: connect, authenticate, trust a CA, explain failures.

``hvdlog grep --es``, ``hvdlog install`` and the compose setup service all connect here, so
a URL with credentials in it, a missing CA or a 401 read the same everywhere:

* credentials come from flags/environment, or from the URL (``https://user:pass@es:9200``);
  they are taken out of the URL before it reaches the client and masked (``user:***``) in
  every message, and Basic auth over plain ``http://`` is warned about (the password
  travels in clear);
* :func:`describe` is the single map from client exceptions to one sentence that says what
  to check; :func:`errors` raises it as :class:`ElasticsearchError`.

The client (elasticsearch-py 8.x, which talks to 9.x servers through its compatible-with=8
headers) is imported only when a connection is made.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote, urlsplit, urlunsplit

if TYPE_CHECKING:
    from elasticsearch import Elasticsearch

__all__ = [
    "CREDENTIALS_HINT",
    "Credentials",
    "ElasticsearchError",
    "connect",
    "describe",
    "errors",
    "mask_credentials",
    "plain_http_warning",
    "split_url",
]

#: What to check on a 401, said the same way by every command.
CREDENTIALS_HINT: Final = (
    "check HVDLOG_ES_USERNAME/HVDLOG_ES_PASSWORD or HVDLOG_ES_API_KEY (or --es-username/--es-password/--es-api-key where the command has them)"
)

#: ``scheme://user:password@`` anywhere in a text.
_URL_USERINFO: Final = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/@\s:]*)(?::[^/@\s]*)?@")


_PORTS: Final = {"Elasticsearch": 9200, "Kibana": 5601}


def plain_http_warning(url: str, secret: str) -> str | None:
    """The warning for sending ``secret`` (a password, an API key) to ``url``, or None over HTTPS."""
    if not url.lower().startswith("http://"):
        return None
    return f"sending {secret} to {mask_credentials(url)} over plain HTTP: anyone on the network can read it; use https:// and a CA"


class ElasticsearchError(RuntimeError):
    """Elasticsearch could not do what was asked; the message is one sentence, credentials masked."""


def mask_credentials(text: str) -> str:
    """Every ``scheme://user:password@`` in ``text`` shown as ``scheme://user:***@``."""
    return _URL_USERINFO.sub(lambda found: f"{found['scheme']}{found['user']}:***@", text)


def split_url(url: str, service: str = "Elasticsearch") -> tuple[str, str | None, str | None]:
    """``https://u:p@es:9200/`` -> (``https://es:9200/``, ``u``, ``p``); no credentials -> (url, None, None).

    Raises :class:`ElasticsearchError` for a URL the client cannot use (no scheme, no host).
    """
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a non-numeric port
    except ValueError as exc:
        raise ElasticsearchError(f"bad {service} URL {mask_credentials(url)!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        example = f"https://{service.lower()}:{_PORTS.get(service, 9200)}"
        raise ElasticsearchError(f"bad {service} URL {mask_credentials(url)!r}: use http(s)://host:port, e.g. {example}")
    if parts.username is None and parts.password is None:
        return url, None, None
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = host if port is None else f"{host}:{port}"
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return clean, unquote(parts.username or ""), unquote(parts.password or "")


@dataclass(frozen=True, slots=True)
class Credentials:
    """How to authenticate: an API key, or a user and password, or nothing."""

    username: str | None = None
    password: str | None = None
    api_key: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, prefix: str = "HVDLOG_ES") -> Credentials:
        """``HVDLOG_ES_API_KEY``, or ``HVDLOG_ES_USERNAME`` + ``HVDLOG_ES_PASSWORD``."""
        env = os.environ if env is None else env
        return cls(env.get(f"{prefix}_USERNAME") or None, env.get(f"{prefix}_PASSWORD"), env.get(f"{prefix}_API_KEY") or None)

    def client_options(self) -> dict[str, Any]:
        """The elasticsearch-py keyword for this kind of auth."""
        if self.api_key:
            return {"api_key": self.api_key}
        if self.username:
            return {"basic_auth": (self.username, self.password or "")}
        return {}


def connect(
    url: str,
    credentials: Credentials | None = None,
    *,
    ca_certs: str | None = None,
    timeout: float = 10.0,
    retries: int = 0,
    warn: Callable[[str], None] | None = None,
) -> Elasticsearch:
    """A client for ``url``; explicit credentials win over ones in the URL.

    Warns (through ``warn``) when Basic credentials would travel over plain HTTP.
    """
    # Several nodes of one cluster: "https://es1:9200,https://es2:9200"; the client moves to
    # another node when one stops answering.
    nodes = [split_url(part.strip()) for part in url.split(",") if part.strip()] or [split_url(url)]
    clean, url_user, url_password = nodes[0]
    hosts: str | list[str] = clean if len(nodes) == 1 else [node[0] for node in nodes]
    retries = max(retries, len(nodes) - 1)
    credentials = credentials or Credentials()
    if not (credentials.username or credentials.api_key) and url_user:
        credentials = Credentials(url_user, url_password)
    secret = "an API key" if credentials.api_key else "a password" if credentials.username else None
    if warn is not None and secret is not None and (text := plain_http_warning(url, secret)) is not None:
        warn(text)
    if ca_certs is not None and not os.path.isfile(ca_certs):
        raise ElasticsearchError(f"the CA file {ca_certs} does not exist (--es-ca / HVDLOG_ES_CA)")
    from elasticsearch import Elasticsearch

    options = {**credentials.client_options(), **({"ca_certs": ca_certs} if ca_certs is not None else {})}
    try:
        return Elasticsearch(hosts, request_timeout=timeout, max_retries=retries, serializer=_fast_json(), **options)
    except (ValueError, TypeError) as exc:
        raise ElasticsearchError(f"cannot use Elasticsearch at {mask_credentials(url)}: {mask_credentials(str(exc))}") from None


def _fast_json() -> Any:
    """The client's JSON serializer with responses decoded by orjson (2-3x faster on big search pages).

    orjson is also what reads the lines of ``.jsonl`` files (:mod:`hvdlog.parse.jsonl`), so a
    document reads the same from both sources. Requests are still encoded by the standard
    serializer. A body orjson refuses (an escaped lone surrogate) is decoded by the standard
    ``json``, as before.
    """
    import orjson
    from elasticsearch.serializer import JsonSerializer

    class OrjsonLoads(JsonSerializer):
        def loads(self, data: bytes) -> Any:
            if data:
                try:
                    return orjson.loads(data)
                except orjson.JSONDecodeError:
                    pass
            return super().loads(data)

    return OrjsonLoads()


#: OpenSSL's reason when the answer to a TLS hello is not TLS (a plain-HTTP server's ``HTTP/1.0 400``).
_PLAIN_HTTP: Final = "WRONG_VERSION_NUMBER"


def _reason(exc: Exception) -> str:
    """The server's own reason from an ApiError body, else the exception's message."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, Mapping) else body
    if isinstance(error, Mapping):
        return str(error.get("reason") or error.get("type") or error)
    if error:
        return str(error)
    return str(getattr(exc, "message", None) or exc)


def describe(exc: BaseException, url: str, doing: str, *, privileges: str = "the privileges this needs", timeout: float | None = None) -> str:
    """What a client exception means for the user, in one sentence, credentials masked."""
    import elastic_transport

    import elasticsearch

    where = f"Elasticsearch at {mask_credentials(url)}"
    if isinstance(exc, elasticsearch.AuthenticationException):
        text = f"{where} rejected the credentials (401) while {doing}: {CREDENTIALS_HINT}"
    elif isinstance(exc, elasticsearch.AuthorizationException):
        text = f"{where} refused {doing} (403: {_reason(exc)}): the user needs {privileges}"
    elif isinstance(exc, elasticsearch.UnsupportedProductError):
        text = f"the server at {mask_credentials(url)} is not an Elasticsearch the client accepts ({exc}); hvdlog needs 8.x or 9.x"
    elif isinstance(exc, elastic_transport.TlsError) and _PLAIN_HTTP in _reason(exc):
        # what an https:// URL meets at a plain-HTTP port: no CA helps, the scheme is wrong
        text = f"TLS with {where} failed: the server speaks plain HTTP: use http://"
    elif isinstance(exc, elastic_transport.TlsError):
        text = f"TLS with {where} failed ({_reason(exc)}): pass the cluster's CA with --es-ca (HVDLOG_ES_CA)"
    elif isinstance(exc, elastic_transport.ConnectionTimeout):
        waited = f" within {timeout:g} s" if timeout is not None else ""
        text = f"{where} gave no answer{waited} while {doing}: is the cluster overloaded? (raise --timeout)"
    elif isinstance(exc, elastic_transport.ConnectionError):
        # urllib3 starts its reason with the connection's repr, the host and port a third time
        reason = re.sub(r"^\w*Connection(Pool)?\(host='[^']*', port=\d+\): ", "", _reason(exc))
        text = f"cannot reach {where}: is it running, and are the scheme, host and port right? ({reason})"
    elif isinstance(exc, elasticsearch.ApiError):
        text = f"{where} refused {doing} ({exc.meta.status}: {_reason(exc)})"
    else:
        text = f"{where} failed while {doing}: {type(exc).__name__}: {exc}"
    return mask_credentials(text)


@contextmanager
def errors(url: str, doing: str, *, privileges: str = "the privileges this needs", timeout: float | None = None) -> Iterator[None]:
    """Turn client exceptions raised inside into :class:`ElasticsearchError` sentences."""
    import elastic_transport

    import elasticsearch

    try:
        yield
    except (elasticsearch.ApiError, elasticsearch.UnsupportedProductError, elastic_transport.TransportError) as exc:
        raise ElasticsearchError(describe(exc, url, doing, privileges=privileges, timeout=timeout)) from exc
