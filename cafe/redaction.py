"""The one place secrets are scrubbed. Everything that writes a file (run store, caches, caption
and leaderboard files), a log record or an error message passes its data through here. Secrets
are found by shape, not by a list of names:

- ``scrub(obj)``: nested dicts/lists; keys named like credentials in any case style (a last word
  ``key``, ``token``, ``secret``, ``password``, ``auth``…: ``api_key``, ``authToken``,
  ``clientSecret``, ``X-Api-Key``) are dropped at any depth, strings are ``scrub_text``-ed;
- ``scrub_text(s)``: URL and bare ``user:pass@`` credentials (→ ``***@host``), query parameters
  named like credentials (``?session_token=…``, ``X-Amz-Security-Token``, ``code``, ``sig``),
  ``Bearer …`` and ``Basic <user:pass>`` credentials, credential-named values in free text
  (``api_key: …`` in a parser's error, ``"clientSecret": "…"`` in JSON), and the value of every
  key variable in use (the known ones, any ``api_key_env`` a client named, and any environment
  variable whose name ends like a credential: ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``…).
  Linear time on any input (perf/scrub_throughput.py).

Key *variable names* (``api_key_env: MY_VAR``) are not secrets and are kept."""

from __future__ import annotations

import base64
import binascii
import functools
import logging
import os
import re
import threading
from typing import Any

#: variables known to hold keys (each client's own, and the default for named servers)
KNOWN_KEY_ENV = (
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "CAFE_ENDPOINT_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
)
#: environment variable names that look like they hold a credential
_ENV_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.IGNORECASE)
#: the last word of a credential-like name, in any case style (authToken, X-Api-Key, api_key)
CREDENTIAL_WORDS = frozenset(
    "key apikey token secret password passwd pwd passphrase auth authorization credential "
    "credentials bearer cookie".split()
)
#: first words that make ``*_token`` a tokenizer's special token, not a credential
_SPECIAL_TOKEN = frozenset(
    "pad eos bos unk sep cls mask audio image video vision per max min num special start "
    "end".split()
)
#: query parameters that carry a credential without being named like one (OAuth codes,
#: signed-URL signatures: X-Amz-Signature, sig=, SAS sv/sig)
_QUERY_WORDS = frozenset("code sig signature".split())
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# Every pattern below starts only where a token starts (a look-behind at the character before)
# and its scans stop at the characters that start the next token, so each character is read a
# bounded number of times: linear time on any input, also 50 MB without a space.
_URL_USERINFO = re.compile(
    r"(?<![A-Za-z0-9+.\-])(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@'\"<>]+@"
)
#: user:pass@host without a scheme (a proxy setting, a log line); not ``kind:model@http://…``
#: (a client's identity: what follows its @ is a URL, never a credential's host)
_BARE_USERINFO = re.compile(
    r"(?<![^\s'\"=(),;<>\[\]{}])[^\s'\"=(),;<>\[\]{}/@:]+:[^\s'\"=(),;<>\[\]{}/@]+@(?=[A-Za-z0-9\[])"
    r"(?![A-Za-z][A-Za-z0-9+.\-]{0,30}://)"
)
_QUERY = re.compile(r"(?P<k>[?&;](?P<name>[A-Za-z0-9_.\-]{1,100})=)(?P<v>[^&#\s'\"<>;]+)")
_BEARER = re.compile(r"(?P<b>\bBearer\s+)[A-Za-z0-9._~+/=\-]{4,}")
_BASIC = re.compile(r"(?P<b>\bBasic\s+)(?P<v>[A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])")
#: ``name: value`` / ``"name": "value"`` / ``name=value`` in free text (parser errors, echoed
#: request bodies, JSON records), the name credential-like in any case style
_NAMED_VALUE = re.compile(
    r"(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z][A-Za-z0-9_.\-]*)(?P<sep>[\"']?[ \t]*[:=][ \t]*[\"']?)"
    r"(?P<v>[A-Za-z0-9_\-+/=.~:!$%*]+)"
)
#: shortest value treated as a secret (shorter ones would scrub ordinary words)
MIN_SECRET_LEN = 6
MASK = "***"

_named: set[str] = set()
_named_lock = threading.Lock()


def register_key_env(name: str | None) -> None:
    """A client reads its key from ``name``: scrub that variable's value everywhere too."""
    if name:
        with _named_lock:
            _named.add(name)


def key_variables() -> list[str]:
    """Every variable whose value is scrubbed: the known ones, the registered ones and any
    environment variable named like a credential."""
    with _named_lock:
        names = {*KNOWN_KEY_ENV, *_named}
    names.update(n for n in os.environ if _ENV_NAME.search(n))
    return sorted(names)


_literal: set[str] = set()


def register_url_credentials(url: str) -> None:
    """An endpoint written ``scheme://user:password@host``: its credentials, as a server may
    echo them decoded (``user:password``, the password alone when long enough to be one, their
    Basic token), are masked everywhere like a key variable's value; the user name alone is
    not."""
    from urllib.parse import unquote, urlsplit

    try:
        parts = urlsplit(url)
        user, pw = parts.username, parts.password
    except ValueError:
        return
    if user is None:
        return
    user, pw = unquote(user), unquote(pw or "")
    pair = f"{user}:{pw}"
    found = {pair, base64.b64encode(pair.encode()).decode()}
    if len(pw) >= MIN_SECRET_LEN:  # the user name alone is no secret (and masking it would
        found.add(pw)  # rewrite every path and word that holds it)
    with _named_lock:
        _literal.update(v for v in found if len(v) > 2)


def secret_values() -> list[str]:
    """Values of the key variables and of credentials written in endpoint URLs, longest first
    (a key containing another is masked whole)."""
    vals = {os.environ.get(n) or "" for n in key_variables()}
    vals = {v for v in vals if len(v) >= MIN_SECRET_LEN}
    with _named_lock:
        vals |= _literal
    return sorted(vals, key=len, reverse=True)


def name_words(name: Any) -> list[str]:
    """A name's words, lower case, whatever its style: authToken, X-Api-Key, api_key, APIKey."""
    return [w.lower() for w in _WORD.findall(str(name))]


@functools.lru_cache(maxsize=4096)
def _secret_name(name: str) -> bool:
    words = name_words(name)
    if not words or words[-1] not in CREDENTIAL_WORDS:
        return False
    return not (words[-1] == "token" and len(words) > 1 and words[-2] in _SPECIAL_TOKEN)


def is_secret_name(name: Any) -> bool:
    """A field or parameter named like a credential: its last word is one (``client_secret``,
    ``authToken``, ``X-Api-Key``); ``*_env`` names a variable and is kept, and a tokenizer's
    special tokens (``pad_token``, ``audio_token``) are not credentials."""
    return _secret_name(str(name))


@functools.lru_cache(maxsize=4096)
def is_secret_query(name: str) -> bool:
    """A URL query parameter that carries a credential (``session_token``, ``access_key``,
    ``X-Amz-Security-Token``, ``subscription-key``, ``code``, ``sig``)."""
    words = name_words(name)
    return is_secret_name(name) or bool(words and words[-1] in _QUERY_WORDS)


#: values after a credential name that are not the secret (the secret follows, masked apart)
_KEPT_VALUES = frozenset((MASK, "Basic", "Bearer", "Digest"))


def _named_value(m: re.Match[str]) -> str:
    name, value = m.group("name"), m.group("v")
    if not is_secret_name(name) or value in _KEPT_VALUES or not any(c.isalpha() for c in value):
        return m.group(0)
    if "://" in value:  # a URL is advice (where a key goes), never a key; its userinfo is
        return m.group(0)  # masked by the URL rules
    bare = len(name_words(name)) == 1 and name.lower() in ("key", "token", "auth")
    if bare and (len(value) < 8 or not any(c.isdigit() for c in value)):
        return m.group(0)  # "key: C major", "token: 5": ordinary words next to a bare name
    return m.group("name") + m.group("sep") + MASK


def _query(m: re.Match[str]) -> str:
    return m.group("k") + MASK if is_secret_query(m.group("name")) else m.group(0)


def _basic(m: re.Match[str]) -> str:
    """``Basic <base64 of user:pass>`` (the word "Basic" before ordinary text is kept)."""
    try:
        decoded = base64.b64decode(m.group("v"), validate=True)
    except (binascii.Error, ValueError):
        return m.group(0)
    return m.group("b") + MASK if b":" in decoded else m.group(0)


def scrub_text(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with URL and bare ``user:pass@`` credentials, credential query values, Bearer
    and Basic credentials, credential-named values (``api_key: …``, ``"authToken": "…"``) and
    the values of key variables replaced by ***. Linear in the length of ``text``."""
    if not text:
        return text
    for v in secret_values() if secrets is None else secrets:
        if v in text:
            text = text.replace(v, MASK)
    if "@" in text:
        text = _URL_USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", text)
        if ":" in text:
            text = _BARE_USERINFO.sub(MASK + "@", text)
    if "=" in text:
        text = _QUERY.sub(_query, text)
    if "earer" in text:
        text = _BEARER.sub(lambda m: m.group("b") + MASK, text)
    if "Basic" in text:
        text = _BASIC.sub(_basic, text)
    if ":" in text or "=" in text:
        text = _NAMED_VALUE.sub(_named_value, text)
    return text


def scrub(obj: Any, secrets: list[str] | None = None) -> Any:
    """A copy of ``obj`` (dicts, lists, tuples, strings, scalars) safe to write anywhere."""
    if secrets is None:
        secrets = secret_values()
    if isinstance(obj, str):
        return scrub_text(obj, secrets)
    if isinstance(obj, dict):
        for k, v in obj.items():  # a variable named as a key source: its value is a secret too
            if str(k).lower().endswith("key_env") and isinstance(v, str) and v:
                register_key_env(v)
                value = os.environ.get(v) or ""
                if len(value) >= MIN_SECRET_LEN and value not in secrets:
                    secrets = [*secrets, value]
        return {k: scrub(v, secrets) for k, v in obj.items() if not is_secret_name(k)}
    if isinstance(obj, list):
        return [scrub(v, secrets) for v in obj]
    if isinstance(obj, tuple):
        return tuple(scrub(v, secrets) for v in obj)
    return obj


def scrub_exception(e: BaseException) -> BaseException:
    """Scrub an exception's message in place (its type and traceback stay): its args, and the
    string attributes a third-party exception builds its message from (PyYAML's problem and
    context), and no snippet of the parsed text (a yaml Mark's buffer)."""
    try:
        e.args = tuple(scrub(a) if isinstance(a, str | dict | list | tuple) else a for a in e.args)
        for name, value in list(vars(e).items()):
            if isinstance(value, str):
                setattr(e, name, scrub_text(value))
            elif isinstance(getattr(value, "buffer", None), str):  # a yaml Mark: its snippet
                value.buffer = None  # quotes the text; the line and column stay
    except (AttributeError, TypeError):
        pass
    return e


class _ScrubbingFactory:
    """A LogRecord factory that formats and scrubs each record's message when it is made."""

    def __init__(self, inner: Any):
        self.inner = inner

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self.inner(*args, **kwargs)
        try:
            msg = record.getMessage()
        except Exception:  # a malformed log call: leave it to logging's own error path
            return record
        record.msg, record.args = scrub_text(msg), None
        return record


def install_log_scrubbing() -> None:
    """Scrub every log record of every logger in this process (idempotent)."""
    factory = logging.getLogRecordFactory()
    if not isinstance(factory, _ScrubbingFactory):
        logging.setLogRecordFactory(_ScrubbingFactory(factory))


class ScrubbingStream:
    """A text stream that scrubs what is written through it (stdout/stderr of the CLI)."""

    def __init__(self, inner: Any):
        self._inner = inner

    def write(self, s: str) -> int:
        self._inner.write(scrub_text(s) if isinstance(s, str) else s)
        return len(s)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
