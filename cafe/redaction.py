"""The one place secrets are scrubbed. Everything that writes a file (run store, caches, caption
and leaderboard files), a log record or an error message passes its data through here:

- ``scrub(obj)``: nested dicts/lists; keys named like credentials (``api_key``, ``token``,
  ``password``, ``authorization``…) are dropped at any depth, strings are ``scrub_text``-ed;
- ``scrub_text(s)``: URL credentials (``user:pass@host`` → ``***@host``), credential query
  parameters (``?key=…`` → ``?key=***``), ``Bearer …`` tokens, and the value of every key
  variable in use (the known ones, any ``api_key_env`` a client named, and any environment
  variable whose name ends like a credential: ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``…).

Key *variable names* (``api_key_env: MY_VAR``) are not secrets and are kept."""

from __future__ import annotations

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
#: option / field names that hold a credential (whole words, so max_new_tokens is not one)
_KEY_NAME = re.compile(
    r"(^|[_\-.])(api_?key|apikey|key|token|access_token|secret|password|passwd|auth|"
    r"authorization|credentials?|bearer|cookie)$",
    re.IGNORECASE,
)
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@'\"]+@")
_QUERY_KEY = re.compile(
    r"(?P<k>[?&;](?:api[_-]?key|key|token|access_token|auth|secret|password|sig|signature)=)"
    r"[^&#\s'\"]+",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<b>\bBearer\s+)[A-Za-z0-9._~+/=\-]{4,}")
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


def secret_values() -> list[str]:
    """Values of the key variables, longest first (a key containing another is masked whole)."""
    vals = {os.environ.get(n) or "" for n in key_variables()}
    return sorted((v for v in vals if len(v) >= MIN_SECRET_LEN), key=len, reverse=True)


def is_secret_name(name: Any) -> bool:
    s = str(name)
    return bool(_KEY_NAME.search(s)) and not s.lower().endswith("_env")


def scrub_text(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with URL credentials, credential query values, bearer tokens and the values of
    key variables replaced by ***."""
    if not text:
        return text
    for v in secret_values() if secrets is None else secrets:
        if v in text:
            text = text.replace(v, MASK)
    if "@" in text:
        text = _URL_USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", text)
    if "=" in text:
        text = _QUERY_KEY.sub(lambda m: m.group("k") + MASK, text)
    if "earer" in text:
        text = _BEARER.sub(lambda m: m.group("b") + MASK, text)
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
    """Scrub an exception's message in place (its type and traceback stay)."""
    try:
        e.args = tuple(scrub(a) if isinstance(a, str | dict | list | tuple) else a for a in e.args)
        if hasattr(e, "message") and isinstance(e.message, str):  # click.ClickException
            e.message = scrub_text(e.message)
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
